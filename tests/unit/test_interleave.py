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

from mlaccel import interleave
from tests import testcase


class TestOrders(testcase.TestCase):

    def test_every_round_runs_every_arm_never_twice_the_same_order(self):
        arms = ['stock', 'a', 'b', 'c']
        drawn = interleave.orders(arms, 20, seed=3)
        self.assertEqual(20, len(drawn))
        for order in drawn:
            self.assertEqual(sorted(arms), sorted(order))
        for before, after in zip(drawn, drawn[1:]):
            self.assertNotEqual(before, after)
        self.assertGreater(len({tuple(o) for o in drawn}), 5)

    def test_same_seed_same_orders(self):
        self.assertEqual(interleave.orders('abc', 5, seed=1),
                         interleave.orders('abc', 5, seed=1))
        self.assertNotEqual(interleave.orders('abcdef', 5, seed=1),
                            interleave.orders('abcdef', 5, seed=2))

    def test_two_arms_alternate_and_one_arm_repeats(self):
        drawn = interleave.orders(['x', 'y'], 4)
        self.assertEqual([drawn[0], drawn[0][::-1]] * 2, drawn)
        self.assertEqual([['x']] * 3, interleave.orders(['x'], 3))
        self.assertEqual([[1, 1]] * 2, interleave.orders([1, 1], 2))
