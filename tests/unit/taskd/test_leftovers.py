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

"""What a task leaves behind: killed with it, reaped, counted.

A task ends when its own process ends, even though a process it started
still holds its event pipe; no zombie stays under the daemon or a
persistent worker, and the slot of the task is free again.
"""

import os


from tests import testcase
from tests.unit.taskd import base
from tests.unit.taskd import sample_tasks

S = base.SAMPLE


def zombies_of(pid):
    """Zombie children of ``pid``."""
    found = []
    for name in os.listdir('/proc'):
        if name.isdigit():
            state = sample_tasks.proc_state(int(name))
            if state == ('Z', pid):
                found.append(int(name))
    return found


def gone(pid):
    """True once ``pid`` has exited and its parent (or init) reaped it."""
    state = sample_tasks.proc_state(pid)
    return state is None or (state[0] == 'Z' and state[1] == 1)


class TestLeftovers(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.daemon = self.useFixture(base.Daemon(max_tasks=1))
        self.client = self.daemon.client()
        self.addCleanup(self.client.close)

    def run_task(self, name, **kwargs):
        task_id = self.client.submit(S + name, {}, **kwargs)
        # A grandchild sleeps 600 s: before the fix the task stayed
        # running that long, so this wait timed out.
        return self.client.wait(task_id, timeout=30)

    def _check_killed(self, status):
        self.assertEqual('succeeded', status['state'], status['error'])
        child = status['result']['child']
        base.wait_for(lambda: gone(child), what='the leftover to be killed')
        self.assertEqual([], zombies_of(self.daemon.process.pid))
        self.assertEqual(1, status.get('leftovers_killed'))

    def test_child_outliving_a_forked_task_is_killed(self):
        status = self.run_task('leave_child')
        self._check_killed(status)
        # The slot (max_tasks = 1) is free again.
        self.assertEqual('succeeded', self.run_task('echo')['state'])

    def test_detached_grandchild_of_a_forked_task_is_killed(self):
        self._check_killed(self.run_task('leave_detached'))

    def test_child_outliving_a_worker_task_is_killed(self):
        status = self.run_task('leave_child', mode='worker')
        self._check_killed(status)
        self.assertEqual(status['pid'], self.run_task(
            'echo', mode='worker')['pid'])

    def test_exited_child_of_a_worker_task_is_reaped(self):
        status = self.run_task('leave_zombie', mode='worker')
        self.assertEqual('succeeded', status['state'], status['error'])
        # The worker lives on, without the zombie its task left.
        self.assertIsNotNone(sample_tasks.proc_state(status['pid']))
        self.assertEqual([], zombies_of(status['pid']))
        self.assertIsNone(sample_tasks.proc_state(status['result']['child']))
        self.assertEqual(0, status.get('leftovers_killed'))

    def test_exited_child_of_a_forked_task_is_reaped(self):
        status = self.run_task('leave_zombie')
        self.assertEqual('succeeded', status['state'], status['error'])
        base.wait_for(lambda: not zombies_of(self.daemon.process.pid),
                      what='no zombie under the daemon')
        self.assertIsNone(sample_tasks.proc_state(status['result']['child']))
