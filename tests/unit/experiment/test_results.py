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

"""Results: the records left out of the rows, and the runs' costs."""

import json
import os

import fixtures

from mlaccel_lab.experiment import results
from mlaccel_lab.experiment import schema
from tests import testcase
from tests.unit.experiment import synthetic


class TestLeftOut(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.results = synthetic.results(seed=2)
        self.tasks = len(self.results['workload']['tasks'])
        runs = results.kept_runs(self.results, 'stock')
        self.spoilt = {
            (1, 0): dict(outcome='failed', error='NoValidHost: none left'),
            (1, 1): dict(outcome='failed', error='2 of 3 tasks did not '
                         'succeed: vm-1 ERROR: no space'),
            (2, 0): dict(outcome='cancelled', error='interrupted')}
        for (run, task), change in self.spoilt.items():
            runs[run]['records'][task].update(change)
        runs[0]['records'][2]['timeline']['durations']['buffering'] = None
        self.spoilt[(0, 2)] = None
        self.keys = {(runs[run]['repetition'], task)
                     for run, task in self.spoilt}
        # A warm-up's records never count.
        warmup = [run for run in self.results['runs'] if run['warmup']
                  and run['arm'] == 'stock']
        warmup[0]['records'][0]['outcome'] = 'failed'

    def test_every_record_left_out_is_counted_with_its_reason(self):
        self.assertEqual({'failed (NoValidHost)': 1, 'failed': 1,
                          'cancelled': 1, 'missing buffering': 1},
                         results.dropped(self.results, 'stock'))
        self.assertEqual(3, results.failures(self.results, 'stock'))

    def test_rows_are_the_records_not_left_out(self):
        rows = results.task_rows(self.results, 'stock')
        self.assertEqual(3 * self.tasks - len(self.spoilt), len(rows))
        self.assertFalse(self.keys & {row['key'] for row in rows})
        launches = {rec['launch_id']: run['repetition']
                    for run in results.kept_runs(self.results, 'stock')
                    for rec in run['records']
                    if results.left_out(rec) is None}
        vms = [row for row in results.vm_rows(self.results)
               if row['arm'] == 'stock']
        self.assertEqual(set(launches), {row['launch'] for row in vms})

    def test_other_arms_lose_nothing(self):
        for arm in results.arm_names(self.results)[1:]:
            self.assertEqual({}, results.dropped(self.results, arm))
            self.assertEqual(0, results.failures(self.results, arm))
            self.assertEqual(3 * self.tasks,
                             len(results.task_rows(self.results, arm)))


class TestCosts(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.results = synthetic.results(seed=2)
        for number, run in enumerate(self.results['runs']):
            run['costs']['pool_member_vm_seconds'] = 10.0 * number

    def test_pool_members_vm_seconds_are_a_mean_per_run(self):
        for arm in results.arm_names(self.results):
            runs = results.kept_runs(self.results, arm)
            self.assertAlmostEqual(
                sum(run['costs']['pool_member_vm_seconds'] for run in runs)
                / len(runs),
                results.costs(self.results, arm)['pool_member_vm_seconds'])

    def test_older_files_without_it_still_load(self):
        for run in self.results['runs']:
            del run['costs']['pool_member_vm_seconds']
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'results.json')
        with open(path, 'w') as out:
            json.dump(self.results, out)
        loaded = results.load(path)
        found = results.costs(loaded, 'stock')
        self.assertNotIn('pool_member_vm_seconds', found)
        self.assertIn('idle_vm_seconds', found)
        del loaded['runs'][0]['costs']['glance_bytes']
        with open(path, 'w') as out:
            json.dump(loaded, out)
        self.assertRaises(schema.InvalidFile, results.load, path)

    def test_cpu_seconds_are_a_mean_per_run_of_the_parts_every_run_has(self):
        runs = results.kept_runs(self.results, 'stock')
        for number, run in enumerate(runs):
            run['costs'][results.CPU_COSTS] = {
                'total': 100.0 + number, 'guests': 10.0 * number}
        runs[0]['costs'][results.CPU_COSTS]['keystone'] = 5.0
        found = results.costs(self.results, 'stock')[results.CPU_COSTS]
        self.assertEqual(['guests', 'total'], sorted(found))
        self.assertAlmostEqual(100.0 + (len(runs) - 1) / 2.0, found['total'])
        self.assertAlmostEqual(5.0 * (len(runs) - 1), found['guests'])
        # A runner that reads none (the simulator): no CPU cost at all.
        self.assertNotIn(results.CPU_COSTS,
                         results.costs(self.results, 'without-pool'))

    def test_cpu_seconds_survive_the_file_and_must_be_numbers(self):
        run = results.kept_runs(self.results, 'stock')[0]
        run['costs'][results.CPU_COSTS] = {'total': 3.5, 'nova-api': 1.0}
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'results.json')
        with open(path, 'w') as out:
            json.dump(self.results, out)
        loaded = results.load(path)
        self.assertEqual({'total': 3.5, 'nova-api': 1.0},
                         results.kept_runs(loaded, 'stock')[0]['costs'][
                             results.CPU_COSTS])
        run['costs'][results.CPU_COSTS]['total'] = 'a lot'
        with open(path, 'w') as out:
            json.dump(self.results, out)
        self.assertRaises(schema.InvalidFile, results.load, path)


class TestArrival(testcase.TestCase):

    def test_clocks_start_at_the_tasks_arrival(self):
        out = synthetic.results(seed=3)
        run = results.kept_runs(out, 'stock')[0]
        rec = run['records'][0]
        before = {row['key']: row for row in results.task_rows(out, 'stock')}
        key = (run['repetition'], rec['experiment_task'])
        self.assertEqual(0.0, before[key]['waiting'])
        # The launch's first create request came 2.5 s after the arrival.
        rec['arrival'] = rec['timeline']['events']['requested'] - 2.5
        after = {row['key']: row for row in results.task_rows(out, 'stock')}
        self.assertAlmostEqual(2.5, after[key]['waiting'])
        for field in ('overhead', 'total'):
            self.assertAlmostEqual(before[key][field] + 2.5,
                                   after[key][field])
        self.assertEqual(before[key]['scheduling'],
                         after[key]['scheduling'])
        # An arrival after the request (clock skew) counts no waiting.
        rec['arrival'] = rec['timeline']['events']['requested'] + 1.0
        self.assertEqual(0.0, results.waiting(rec))
