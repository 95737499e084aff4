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

"""Tasks run by a real daemon process: context, crashes, cancel, limits."""

import os
import signal


from mlaccel.taskd import client
from mlaccel.taskd import protocol
from tests import testcase
from tests.unit.taskd import base

S = base.SAMPLE


class TaskdTestCase(testcase.TestCase):
    daemon_options = {}

    def setUp(self):
        super().setUp()
        self.daemon = self.useFixture(base.Daemon(**self.daemon_options))
        self.client = self.daemon.client()
        self.addCleanup(self.client.close)

    def started(self, task_id, timeout=60):
        """Wait until the task reported its first step; return its pid."""
        base.wait_for(lambda: self.client.status(task_id)['first_step_at'],
                      timeout, 'task %s to take its first step' % task_id)
        return self.client.status(task_id)['pid']

    def run_task(self, name, args=None, **kwargs):
        task_id = self.client.submit(S + name, args, **kwargs)
        return self.client.wait(task_id, timeout=60)


class TestTaskContext(TaskdTestCase):

    def _check_context(self, mode):
        status = self.run_task(
            'echo', {'say': 'hello'}, env={'SAMPLE_ENV': 'set'}, threads=3,
            cwd=self.daemon.dir, seed=11, mode=mode)
        self.assertEqual('succeeded', status['state'], status['error'])
        result = status['result']
        self.assertEqual({'say': 'hello'}, result['args'])
        self.assertEqual('set', result['env'])
        self.assertEqual('3', result['omp'])
        self.assertEqual(self.daemon.dir, result['cwd'])
        self.assertEqual(0, status['exit_code'])
        self.assertEqual(result['pid'], status['pid'])
        self.assertNotEqual(self.daemon.process.pid, result['pid'])
        self.assertLessEqual(status['started_at'], status['first_step_at'])
        self.assertLessEqual(status['first_step_at'], status['finished_at'])
        self.assertEqual('echo says hello\n',
                         self.client.logs(status['id']))
        return status

    def test_fork_task_gets_its_context(self):
        self.assertEqual('fork', self._check_context('fork')['mode'])

    def test_worker_task_gets_its_context_and_worker_is_reused(self):
        first = self._check_context('worker')
        second = self._check_context('worker')
        self.assertEqual(first['pid'], second['pid'])
        # The first task's environment did not leak into the worker.
        status = self.run_task('echo', mode='worker')
        self.assertIsNone(status['result']['env'])

    def test_seeds(self):
        def draw(**kwargs):
            return self.run_task('echo', **kwargs)['result']['draw']
        same = {draw(seed=5), draw(seed=5), draw(seed=5, mode='worker')}
        self.assertEqual(1, len(same))
        self.assertNotEqual(draw(seed=5), draw(seed=6))
        # Without a seed a task gets a fresh one, not the daemon's state.
        self.assertNotEqual(draw(), draw())

    def test_logs_tail(self):
        status = self.run_task('fail')
        logs = self.client.logs(status['id'])
        self.assertIn('about to fail', logs)
        self.assertIn('Traceback', logs)
        tail = self.client.logs(status['id'], tail=1)
        self.assertEqual(1, len(tail.splitlines()))
        self.assertIn('RuntimeError: task failed on purpose', tail)

    def test_resource_limits(self):
        status = self.run_task('limits', limits={'nofile': 100})
        self.assertEqual({'nofile': 100}, status['result'])
        err = self.assertRaises(client.TaskdError, self.client.submit,
                                S + 'limits', limits={'bogus': 1})
        self.assertEqual(protocol.INVALID, err.code)
        err = self.assertRaises(client.TaskdError, self.client.submit,
                                S + 'limits', limits={'nofile': 100},
                                mode='worker')
        self.assertEqual(protocol.INVALID, err.code)

    def test_unknown_task(self):
        err = self.assertRaises(client.TaskdError, self.client.status,
                                'f' * 32)
        self.assertEqual(protocol.NOT_FOUND, err.code)

    def test_missing_entry_fails_the_task(self):
        status = self.run_task('no_such_function')
        self.assertEqual('failed', status['state'])
        self.assertIn('AttributeError', status['error'])

    def test_wait_times_out(self):
        task_id = self.client.submit(S + 'sleep', {'seconds': 30})
        self.assertRaises(TimeoutError, self.client.wait, task_id, 0.2)
        self.assertEqual('running', self.client.status(task_id)['state'])


class TestConcurrencyAndCrashes(TaskdTestCase):

    def test_concurrent_tasks_overlap(self):
        ids = [self.client.submit(S + 'sleep', {'seconds': 1.0})
               for _ in range(3)]
        done = [self.client.wait(task_id, 60) for task_id in ids]
        self.assertEqual(['succeeded'] * 3, [s['state'] for s in done])
        self.assertEqual(3, len({s['pid'] for s in done}))
        self.assertLess(max(s['started_at'] for s in done),
                        min(s['finished_at'] for s in done))

    def test_crashes_harm_neither_daemon_nor_other_tasks(self):
        survivor = self.client.submit(S + 'sleep', {'seconds': 1.0})
        expected = {
            'fail': (1, 'RuntimeError: task failed on purpose'),
            'exit_code': (3, 'exited with code 3'),
            'segfault': (-signal.SIGSEGV, 'SIGSEGV'),
            'kill_self': (-signal.SIGKILL, 'SIGKILL'),
            'not_json': (1, 'not JSON serializable'),
        }
        for mode in ('fork', 'worker'):
            for name, (code, message) in expected.items():
                status = self.run_task(name, mode=mode)
                self.assertEqual('failed', status['state'], (mode, name))
                self.assertEqual(code, status['exit_code'], (mode, name))
                self.assertIn(message, status['error'])
        self.assertEqual('succeeded',
                         self.client.wait(survivor, 60)['state'])
        health = self.client.health()
        self.assertEqual('ready', health['state'])
        # Workers killed by their tasks were replaced.
        self.assertEqual('succeeded',
                         self.run_task('echo', mode='worker')['state'])


class TestCancel(TaskdTestCase):
    daemon_options = {'max_tasks': 1}

    def test_cancel_running_and_queued(self):
        running = self.client.submit(S + 'sleep', {'seconds': 60})
        self.started(running)
        queued = self.client.submit(S + 'sleep', {'seconds': 60})
        self.assertEqual('queued', self.client.status(queued)['state'])
        self.client.cancel(queued)
        status = self.client.wait(queued, 10)
        self.assertEqual('cancelled', status['state'])
        self.assertIsNone(status['started_at'])
        self.client.cancel(running)
        status = self.client.wait(running, 30)
        self.assertEqual('cancelled', status['state'])
        self.assertEqual(-signal.SIGTERM, status['exit_code'])
        # The freed slot serves the next task.
        self.assertEqual('succeeded', self.run_task('echo')['state'])

    def test_cancel_escalates_to_sigkill(self):
        task_id = self.client.submit(S + 'ignore_term', {'seconds': 60})
        self.started(task_id)
        self.client.cancel(task_id)
        status = self.client.wait(task_id, 30)
        self.assertEqual('cancelled', status['state'])
        self.assertEqual(-signal.SIGKILL, status['exit_code'])

    def test_cancel_worker_task_replaces_worker(self):
        task_id = self.client.submit(S + 'sleep', {'seconds': 60},
                                     mode='worker')
        old_pid = self.started(task_id)
        self.client.cancel(task_id)
        self.assertEqual('cancelled',
                         self.client.wait(task_id, 30)['state'])
        status = self.run_task('echo', mode='worker')
        self.assertEqual('succeeded', status['state'])
        self.assertNotEqual(old_pid, status['pid'])


class TestLimitsOfTheDaemon(TaskdTestCase):
    daemon_options = {'workers': 0, 'max_result_bytes': 1024}

    def test_worker_mode_disabled(self):
        err = self.assertRaises(client.TaskdError, self.client.submit,
                                S + 'echo', mode='worker')
        self.assertEqual(protocol.INVALID, err.code)

    def test_result_too_large(self):
        status = self.run_task('big_result', {'size': 4096})
        self.assertEqual('failed', status['state'])
        self.assertIn('larger than 1024 bytes', status['error'])
        self.assertEqual('succeeded',
                         self.run_task('big_result', {'size': 10})['state'])


class TestDrain(TaskdTestCase):
    daemon_options = {'grace_period': 30.0}

    def test_sigterm_lets_running_task_finish(self):
        """The task runs until released, so no step races the drain."""
        marker = os.path.join(self.daemon.dir, 'marker')
        release = os.path.join(self.daemon.dir, 'release')
        task_id = self.client.submit(S + 'touch_when_released',
                                     {'path': marker, 'release': release})
        self.started(task_id)
        self.daemon.process.send_signal(signal.SIGTERM)
        base.wait_for(lambda: self.client.health()['state'] == 'draining', 30,
                      'the daemon to drain')
        err = self.assertRaises(client.TaskdError, self.client.submit,
                                S + 'echo')
        self.assertEqual(protocol.DRAINING, err.code)
        self.assertEqual('running', self.client.status(task_id)['state'])
        open(release, 'w').close()
        self.assertEqual(0, self.daemon.process.wait(30))
        self.assertTrue(os.path.exists(marker))
        self.assertFalse(os.path.exists(self.daemon.socket_path))
        self.assertIn('Task %s succeeded' % task_id, self.daemon.output())


class TestDrainGrace(TaskdTestCase):
    daemon_options = {'grace_period': 0.3}

    def test_tasks_killed_after_grace_period(self):
        marker = os.path.join(self.daemon.dir, 'marker')
        task_id = self.client.submit(S + 'touch_after',
                                     {'path': marker, 'seconds': 60})
        self.started(task_id)
        self.assertEqual(0, self.daemon.terminate(30))
        self.assertFalse(os.path.exists(marker))
        self.assertFalse(os.path.exists(self.daemon.socket_path))
        self.assertIn('Killing task %s' % task_id, self.daemon.output())
