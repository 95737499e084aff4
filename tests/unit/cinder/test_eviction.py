#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

import types


from mlaccel.cinder import eviction

from tests import testcase


def entry(name, size, priority, busy=False):
    return types.SimpleNamespace(name=name, size=size, priority=priority,
                                 busy=busy)


class GDSFTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.policy = eviction.GDSF()

    def test_value_is_frequency_times_cost_per_byte(self):
        self.assertEqual(2 * 3.0 / 100, self.policy.priority(2, 3.0, 100))
        # Same cost and hits: the larger entry is worth less per byte.
        self.assertLess(self.policy.priority(1, 1.0, 200),
                        self.policy.priority(1, 1.0, 100))

    def test_lowest_priority_goes_first(self):
        es = [entry('a', 3, 0.9), entry('b', 3, 0.1), entry('c', 3, 0.5)]
        victims = self.policy.victims(es, 3, max_bytes=9, max_count=0)
        self.assertEqual(['b'], [v.name for v in victims])

    def test_count_limit(self):
        es = [entry('a', 1, 0.9), entry('b', 1, 0.1), entry('c', 1, 0.5)]
        victims = self.policy.victims(es, 1, max_bytes=0, max_count=2)
        self.assertEqual(['b', 'c'], [v.name for v in victims])

    def test_busy_entries_are_never_victims(self):
        es = [entry('a', 3, 0.1, busy=True), entry('b', 3, 0.5)]
        victims = self.policy.victims(es, 3, max_bytes=6, max_count=0)
        self.assertEqual(['b'], [v.name for v in victims])

    def test_no_room_evicts_nothing(self):
        es = [entry('a', 3, 0.1, busy=True), entry('b', 3, 0.5)]
        self.assertIsNone(self.policy.victims(es, 4, max_bytes=6,
                                              max_count=0))
        self.assertIsNone(self.policy.victims([], 7, max_bytes=6,
                                              max_count=0))

    def test_unlimited(self):
        es = [entry('a', 3, 0.1)]
        self.assertEqual([], self.policy.victims(es, 10 ** 12, 0, 0))

    def test_eviction_ages_the_cache(self):
        old = entry('old', 1, self.policy.priority(100, 1.0, 1))
        self.policy.evicted(old)
        # A new entry used once now outranks entries priced before aging.
        self.assertGreater(self.policy.priority(1, 1.0, 1), old.priority)
