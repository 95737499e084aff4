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

"""``mlaccel pool``: list, members, set and delete on a real store."""

import os
import subprocess
import sys
import time

import fixtures

from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store

from tests import testcase

SPEC = pool_spec.PoolSpec('proj', 'img', 'flv', preload=['json'])
TOKEN = 'member-token-0123456789'


class TestPoolCli(testcase.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.dir = os.path.join(tmp, 'pools')
        self.conf = os.path.join(tmp, 'mlaccel.conf')
        with open(self.conf, 'w') as stream:
            stream.write('[mlaccel_pool]\nstate_dir = %s\n'
                         '[mlaccel_statebus]\nbackend_url = file://%s\n'
                         % (self.dir, os.path.join(tmp, 'bus')))
        state = pool_store.new_state(SPEC, 1, 3, 4)
        state['members']['s1'] = {
            'server_id': 's1', 'name': 'n1', 'state': pool_store.IDLE,
            'tasks': 2, 'idle_since': 1.0, 'ready_at': 1.0, 'holder': None,
            'token': TOKEN}
        state['stats'].update(idle_vm_s=30.0, tasks_served=3)
        with pool_store.PoolStore(self.dir).transaction(SPEC.key,
                                                        create=state):
            pass

    def cli(self, *args):
        process = subprocess.run(
            [sys.executable, '-c', 'import sys; from mlaccel.cmd import '
             'launch; sys.exit(launch.cli(sys.argv[1:]))', 'pool']
            + list(args) + ['--config-file', self.conf],
            capture_output=True, text=True, timeout=120)
        return process.returncode, process.stdout, process.stderr

    def test_list_and_members_never_show_tokens(self):
        code, out, err = self.cli('list')
        self.assertEqual(0, code, err)
        self.assertIn(SPEC.key, out)
        self.assertIn('idle_vm_s_per_task', out)
        code, out, err = self.cli('members', SPEC.key)
        self.assertEqual(0, code, err)
        self.assertIn('s1', out)
        self.assertNotIn(TOKEN, out + err)

    def test_list_shows_a_paused_pool(self):
        with pool_store.PoolStore(self.dir).transaction(SPEC.key) as state:
            state['stats'].update(create_failures=2, failed_rounds=2,
                                  capacity_until=time.time() + 3600)
        code, out, err = self.cli('list')
        self.assertEqual(0, code, err)
        header, row = out.splitlines()
        fields = dict(zip(header.split(), row.split()))
        self.assertEqual('2', fields['create_failures'])
        self.assertTrue(3000 < float(fields['paused_s']) <= 3600, out)

    def test_set_bounds_checked_and_kept(self):
        code, _, err = self.cli('set', SPEC.key, '--min', '5')
        self.assertEqual(2, code)
        self.assertIn('max (3) must be at least min (5)', err)
        code, _, err = self.cli('set', SPEC.key, '--min', '2', '--max', '6')
        self.assertEqual(0, code, err)
        state = pool_store.PoolStore(self.dir).read(SPEC.key)
        self.assertEqual({'min': 2, 'max': 6}, state['bounds'])
        self.assertEqual('s1', list(state['members'])[0])

    def test_delete_refuses_a_pool_with_members(self):
        code, _, err = self.cli('delete', SPEC.key)
        self.assertEqual(2, code)
        self.assertIn('still has 1 members', err)
        code, _, err = self.cli('members', 'nosuchpool')
        self.assertEqual(2, code)
