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

"""TaskRunner: tasks launched in threads at their arrivals, failures kept."""

import threading

import fixtures

from mlaccel.launcher import record
from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results
from mlaccel_lab.experiment import runner
from tests import testcase
from tests.unit.experiment import synthetic


class _Launches(runner.TaskRunner):
    """Launches that meet at a barrier: they finish only if they overlap.

    The record is made from the task itself (creation grows with the VM
    count; the task of index ``fail`` raises).
    """

    kind = 'threads'
    time_scale = 0.0

    def __init__(self, fail=None):
        self.barrier = None
        self.fail = fail
        self.reset_arms = []

    def reset(self, arm):
        self.reset_arms.append(arm.name)

    def warm_up(self, arm):
        self.reset_arms.append('warm-up ' + arm.name)

    def run(self, arm, workload, done):
        # Every task of the run launches at the same time.
        self.barrier = threading.Barrier(len(workload.tasks), timeout=20)
        return super().run(arm, workload, done)

    def launch(self, arm, workload, task):
        self.barrier.wait()
        if task.index == self.fail:
            raise RuntimeError('no valid host')
        now = 1000.0 * task.index
        vms = [{'name': 'vm%d' % i, 'facts': dict.fromkeys(
            results.VM_FACTS, 0), 'observed': {
            'requested': now, 'notified': {
                'scheduled': now + 1, 'active': now + 1 + task.vms},
            'first_step_at': now + 2 + task.vms,
            'finished_at': now + 12 + task.vms}} for i in range(task.vms)]
        return record.build('l%d' % task.index, {
            'args': {'steps': task.steps}}, vms, 'succeeded')

    def costs(self, arm):
        return {'glance_bytes': 5, 'volume_copies': 1}


class TestTaskRunner(testcase.TestCase):

    def test_tasks_overlap_and_a_failed_launch_is_kept_as_failed(self):
        logged = self.useFixture(fixtures.FakeLogger())
        made = synthetic.fixed_workload()
        launches = _Launches(fail=2)
        out = runner.execute(launches, made, arms.main_arms(),
                             progress=False)
        # Each run: its reset, then its warm-up request.
        self.assertEqual(launches.reset_arms, [
            name for r in out['runs']
            for name in (r['arm'], 'warm-up ' + r['arm'])])
        warmups = [run for run in out['runs'] if run['warmup']]
        self.assertEqual(len(arms.main_arms()), len(warmups))
        short = made.warmup()
        for run in warmups:
            self.assertEqual([t.index for t in short.tasks],
                             [r['experiment_task'] for r in run['records']])
        for run in out['runs'][len(warmups):]:
            self.assertEqual(list(range(len(made.tasks))),
                             [r['experiment_task'] for r in run['records']])
            outcomes = [r['outcome'] for r in run['records']]
            self.assertEqual('failed', outcomes[2])
            self.assertIn('no valid host', run['records'][2]['error'])
            self.assertEqual(len(made.tasks) - 1,
                             outcomes.count('succeeded'))
            self.assertEqual({'glance_bytes': 5, 'volume_copies': 1,
                              'pool_idle_vm_seconds': 0,
                              'pool_member_vm_seconds': 0}, run['costs'])
            # Every record knows when its task arrived.
            self.assertTrue(all(r['arrival'] for r in run['records']))
        self.assertEqual(3, results.failures(out, 'stock'))
        rows = results.task_rows(out, 'stock')
        self.assertEqual(3 * (len(made.tasks) - 1), len(rows))
        for row in rows:
            task = made.tasks[row['key'][1]]
            self.assertEqual(task.vms, row['creation'])
        text = report.format_summary(report.summarize(out), 'threads')
        self.assertIn('3 record(s) left out: failed (RuntimeError)', text)
        self.assertIn('Task 2 of arm stock failed', logged.output)

    def test_each_finished_run_is_handed_over_as_it_ends(self):
        made = synthetic.fixed_workload()
        launches = _Launches()
        seen = []
        out = runner.execute(launches, made, arms.main_arms(),
                             progress=False,
                             on_run=lambda partial: seen.append(
                                 [r['arm'] for r in partial['runs']]))
        names = [r['arm'] for r in out['runs']]
        self.assertEqual([names[:n] for n in range(1, len(names) + 1)],
                         seen)
