# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Whose word makes an image hot, and how many bytes of it."""

from mlaccel import hottrust
from tests import testcase

OPERATOR = 'admin-project'


class TrustTest(testcase.TestCase):

    def test_marks_count_only_from_trusted_owners(self):
        self.assertTrue(hottrust.trusted(OPERATOR, {OPERATOR}))
        self.assertFalse(hottrust.trusted('tenant', {OPERATOR}))
        self.assertFalse(hottrust.trusted('', {''}))
        self.assertFalse(hottrust.trusted(None, {None}))

    def test_demand_counts_on_public_or_trusted_images(self):
        for visibility in ('public', 'private', 'shared', 'community'):
            self.assertTrue(hottrust.hot_by_demand(OPERATOR, visibility,
                                                   {OPERATOR}))
        self.assertTrue(hottrust.hot_by_demand('tenant', 'public',
                                               {OPERATOR}))
        for visibility in ('private', 'shared', 'community', ''):
            self.assertFalse(hottrust.hot_by_demand('tenant', visibility,
                                                    {OPERATOR}))


class BudgetTest(testcase.TestCase):

    def test_per_image_bound(self):
        budget = hottrust.Budget(max_image=100, max_owner=0)
        self.assertIsNone(budget.refusal('a', 100))
        self.assertIn('per image', budget.refusal('a', 101))

    def test_per_owner_bound_counts_admitted_images_only(self):
        budget = hottrust.Budget(max_image=0, max_owner=100)
        self.assertIsNone(budget.refusal('a', 60))
        self.assertIn('per owner', budget.refusal('a', 50))
        self.assertIsNone(budget.refusal('a', 40))   # the 50 did not count
        self.assertIsNone(budget.refusal('b', 100))  # owners apart
        self.assertIn('per owner', budget.refusal('a', 1))

    def test_unbounded_and_unknown_sizes(self):
        budget = hottrust.Budget(0, 0)
        self.assertIsNone(budget.refusal('a', 1 << 60))
        self.assertIsNone(hottrust.Budget(10, 10).refusal('a', None))
