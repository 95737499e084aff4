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

"""The simulator at scale: assumptions, sensitivity, compact records."""

import os
import tempfile

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import production
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import validation
from tests import testcase
from tests.unit.experiment import test_simulator

TASKS = 24


def at_scale(tasks=TASKS):
    return production.run(test_simulator.calib(), production.load(),
                          [arms.STOCK, arms.MLACCEL], 3, tasks=tasks,
                          progress=False)


class TestAtScale(testcase.TestCase):

    def test_pools_are_learned_and_their_members_cost(self):
        results, scaled = at_scale()
        self.assertEqual(1000, scaled.hosts)
        self.assertEqual(production.load()['pool_options'],
                         results['preconditions']['pool_options'])
        costs = results_mod.costs(results, 'mlaccel')
        self.assertGreaterEqual(costs['pool_member_vm_seconds'],
                                costs['pool_idle_vm_seconds'])
        summary = report.summarize(results)
        self.assertIsNotNone(summary['reductions']['mlaccel']['overhead'])

    def test_every_assumption_has_a_value_and_a_source(self):
        stated = production.load()
        scaled = production.for_production(test_simulator.calib(), stated)
        rows = production.assumptions(stated, scaled)
        names = {name for name, _value, _source in rows}
        for name in ('images', 'flavors', 'arrivals', 'guest_boot_seconds',
                     '[mlaccel_pool] budget_members',
                     '[mlaccel_pool] interval'):
            self.assertIn(name, names)
        self.assertTrue(all(source for _name, _value, source in rows))
        budget = dict((n, v) for n, v, _s in rows)[
            '[mlaccel_pool] budget_members']
        self.assertEqual(stated['pool_options']['budget_members'], budget)

    def test_sensitivity_varies_boot_images_and_flavors(self):
        rows = production.sensitivity(test_simulator.calib(),
                                      production.load(), tasks=TASKS)
        self.assertEqual(('as stated', '-'), rows[0][:2])
        self.assertEqual(
            [('guest boot time x', 0.5), ('guest boot time x', 2.0),
             ('images', 3), ('images', 10), ('images', 30),
             ('flavors', 1), ('flavors', 4)],
            [row[:2] for row in rows[1:]])
        for row in rows:
            self.assertIsNotNone(row[2])
            self.assertTrue(0.0 <= row[3] <= 100.0)

    def test_flavors_follow_the_trace_shares(self):
        made = production.workload(production.load(), tasks=200)
        flavor = production.flavor_of(dict(production.load(), flavors=4))
        self.assertEqual(4, len({flavor(t) for t in made.tasks}))
        one = production.flavor_of(dict(production.load(), flavors=1))
        self.assertEqual(1, len({one(t) for t in made.tasks}))


class TestWrite(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.results, _ = at_scale()
        self.directory = tempfile.mkdtemp()

    def test_distributions_only_unless_records_are_asked_for(self):
        paths = production.write(self.results, self.directory)
        self.assertEqual([production.DISTRIBUTIONS],
                         sorted(os.listdir(self.directory)))
        written = production.schema.read(paths[0])
        arm = written['distributions']['mlaccel']
        self.assertEqual(3 * TASKS, arm['tasks'])
        overhead = arm['fields']['overhead']
        self.assertLessEqual(overhead['p5'], overhead['p50'])
        self.assertLessEqual(overhead['p50'], overhead['p95'])
        self.assertIn('pool_member_vm_seconds', arm['costs'])
        self.assertIsNotNone(arm['hit_rate_pct'])
        self.assertNotIn('runs', written)
        self.assertNotIn('tasks', written['workload'])

    def test_records_round_trip(self):
        paths = production.write(self.results, self.directory, records=True)
        self.assertTrue(paths[1].endswith('.jsonl.gz'))
        self.assertEqual(self.results, production.read_records(paths[1]))


class TestValidateLearned(testcase.TestCase):

    def test_hit_rates_are_judged_for_arms_with_pools(self):
        cal = test_simulator.calib()
        made = test_simulator.make(
            [(20.0 * i, 'img', 1, 'image') for i in range(12)])
        measured = runner.execute(simrunner.SimulatedRunner(cal, seed=3),
                                  made, [arms.STOCK, arms.only(arms.POOL)],
                                  warmup=0, progress=False)
        checked = validation.validate(measured, cal)
        judged = {(c.arm, c.field) for c in checked.judged}
        self.assertIn(('only-pool', validation.HIT_RATE), judged)
        self.assertIn(('stock', validation.MEDIAN), judged)
        self.assertNotIn(('stock', validation.HIT_RATE), judged)
        self.assertTrue(checked.passed, checked.format())
        self.assertIn('points', checked.format())
