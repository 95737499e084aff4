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

import subprocess
import sys
import time

from mlaccel.pool import demand
from mlaccel.pool import store as pool_store
from tests import fixtures as mlaccel_fixtures
from tests import testcase

SPEC, TOKEN = mlaccel_fixtures.OnePool.SPEC, mlaccel_fixtures.OnePool.TOKEN


class TestPoolCli(testcase.TestCase):

    def setUp(self):
        super().setUp()
        pool = self.useFixture(mlaccel_fixtures.OnePool())
        self.dir, self.conf = pool.dir, pool.conf

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

    def test_list_counts_members_in_full_and_states_the_budget(self):
        with pool_store.PoolStore(self.dir).transaction(SPEC.key) as state:
            state['stats'].update(build_vm_s=40.0)
        with open(self.conf, 'a') as stream:
            stream.write('[mlaccel_pool]\nlearn = true\n'
                         'learn_projects = proj\n'
                         'budget_members = 3\n')
        code, out, err = self.cli('list')
        self.assertEqual(0, code, err)
        header, row, budget, day = out.splitlines()
        fields = dict(zip(header.split(), row.split()))
        self.assertEqual('operator', fields['origin'])
        # Build, boot and preload counted beside the idle time.
        self.assertAlmostEqual(float(fields['idle_vm_s']) + 40.0,
                               float(fields['member_vm_s']), delta=1.0)
        self.assertEqual('budget: 1 of 3 warm members at once; learned '
                         'pools for projects proj', budget)
        # The operator's warm member counts a whole day.
        self.assertEqual('budget of proj: 24.0 of 96 idle VM-hours spent '
                         'over the last 24 hours (learned pools, and 24 per '
                         'warm member of an operator\'s pool): within', day)
        # The learned pools' recorded day counts too, and a day past the
        # budget says so.
        store = pool_store.PoolStore(self.dir)
        demand.DemandLog(store).record_spend('proj', 4, now=time.time()
                                             - 20 * 3600.0)
        code, out, err = self.cli('list')
        self.assertEqual(0, code, err)
        self.assertTrue(out.splitlines()[-1].endswith('EXCEEDED'), out)
        self.assertIn('104.0 of 96', out)

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
