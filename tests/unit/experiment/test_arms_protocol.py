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

"""The arms as data and the interleaved, seeded protocol."""

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import protocol
from tests import testcase


class TestArms(testcase.TestCase):

    def test_ablations_turn_each_mechanism_on_alone_and_off_alone(self):
        found = {arm.name: arm for arm in arms.ablation_arms()}
        # The main arms (stock, tuned stock, without pools, mlaccel), each
        # mechanism alone, and each of the others left out.
        self.assertEqual(3 + 2 * len(arms.MECHANISMS), len(found))
        self.assertEqual(frozenset(), found['stock'].mechanisms)
        self.assertEqual(frozenset(), found['stock'].tunings)
        self.assertEqual(frozenset(), found['tuned-stock'].mechanisms)
        self.assertTrue(found['tuned-stock'].tuned(
            arms.CINDER_IMAGE_CACHE))
        self.assertEqual(frozenset(arms.MECHANISMS),
                         found['mlaccel'].mechanisms)
        for mechanism in arms.MECHANISMS:
            self.assertEqual({mechanism},
                             found['only-' + mechanism].mechanisms)
            self.assertEqual(set(arms.MECHANISMS) - {mechanism},
                             found['without-' + mechanism].mechanisms)

    def test_unknown_mechanism_and_arm_are_refused(self):
        self.assertRaises(ValueError, arms.Arm, 'x', frozenset(['gpu']))
        self.assertRaises(ValueError, arms.STOCK.on, 'gpu')
        error = self.assertRaises(ValueError, arms.by_name,
                                  ['stock', 'only-gpu'])
        self.assertIn('only-gpu', str(error))

    def test_round_trip(self):
        for arm in (arms.without(arms.MIRROR), arms.TUNED_STOCK):
            self.assertEqual(arm, arms.Arm.from_dict(arm.to_dict()))
        # Results written before arms had tunings still load.
        self.assertEqual(arms.STOCK, arms.Arm.from_dict(
            {'name': 'stock', 'mechanisms': []}))

    def test_main_arms_set_the_papers_mechanisms_beside_mlaccel(self):
        self.assertEqual(['stock', 'tuned-stock', 'without-pool', 'mlaccel'],
                         [arm.name for arm in arms.main_arms()])


class TestProtocol(testcase.TestCase):

    def test_each_repetition_runs_every_arm_once_after_the_warmup(self):
        chosen = arms.ablation_arms()
        runs = protocol.schedule(chosen, repetitions=3, warmup=1, seed=4)
        self.assertEqual(4 * len(chosen), len(runs))
        self.assertTrue(all(r.warmup for r in runs[:len(chosen)]))
        self.assertFalse(any(r.warmup for r in runs[len(chosen):]))
        for repetition in range(4):
            names = [r.arm.name for r in runs if r.repetition == repetition]
            self.assertEqual(sorted(a.name for a in chosen), sorted(names))

    def test_order_changes_between_repetitions_even_for_two_arms(self):
        for seed in range(20):
            runs = protocol.schedule(arms.main_arms(), 5, 1, seed)
            orders = [tuple(r.arm.name for r in runs if r.repetition == i)
                      for i in range(6)]
            for before, after in zip(orders, orders[1:]):
                self.assertNotEqual(before, after)

    def test_seeded(self):
        chosen = arms.ablation_arms()
        names = [[r.arm.name for r in protocol.schedule(chosen, seed=s)]
                 for s in (1, 1, 2)]
        self.assertEqual(names[0], names[1])
        self.assertNotEqual(names[0], names[2])

    def test_too_few_repetitions_or_bad_arms_are_refused(self):
        self.assertRaises(ValueError, protocol.schedule, arms.main_arms(),
                          repetitions=2)
        self.assertRaises(ValueError, protocol.schedule, [])
        self.assertRaises(ValueError, protocol.schedule,
                          [arms.STOCK, arms.STOCK])
