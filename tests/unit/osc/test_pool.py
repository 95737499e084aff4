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

"""``openstack mlaccel pool list`` and ``pool show`` on a real pool store."""

import os

import fixtures

from mlaccel.osc import common
from tests import fixtures as mlaccel_fixtures
from tests.unit.osc import base

SPEC, TOKEN = mlaccel_fixtures.OnePool.SPEC, mlaccel_fixtures.OnePool.TOKEN


class PoolCommandTest(base.TestCase):

    def setUp(self):
        super().setUp()
        pool = self.useFixture(mlaccel_fixtures.OnePool())
        self.dir, self.conf = pool.dir, pool.conf

    def test_list_as_mlaccel_pool_list(self):
        [row] = self.openstack_json('mlaccel', 'pool', 'list',
                                    '--config-file', self.conf)
        self.assertEqual(SPEC.key, row['key'])
        self.assertEqual(('img', 'flv', 1, 3, 1, 0),
                         (row['image'], row['flavor'], row['min'],
                          row['max'], row['idle'], row['claimed']))
        self.assertEqual(3, row['tasks_served'])
        # Idle time so far counts: the member is idle since 1970.
        self.assertGreater(row['idle_vm_s'], 1e9)
        self.assertAlmostEqual(row['idle_vm_s'] / 3,
                               row['idle_vm_s_per_task'], delta=1.0)
        self.assertIsNone(row['paused_s'])

    def test_list_as_a_table(self):
        status, out, err = self.openstack('mlaccel', 'pool', 'list',
                                          '--config-file', self.conf)
        self.assertEqual(0, status, err)
        self.assertIn(SPEC.key, out)
        self.assertIn('idle_vm_s_per_task', out)
        self.assertNotIn(TOKEN, out + err)

    def test_the_config_file_from_the_environment(self):
        self.useFixture(fixtures.EnvironmentVariable(
            common.CONFIG_FILE_ENV, self.conf))
        [row] = self.openstack_json('mlaccel', 'pool', 'list')
        self.assertEqual(SPEC.key, row['key'])
        # --config-file wins over the environment.
        empty = self.write('empty.conf', '[mlaccel_pool]\nstate_dir = %s\n'
                           % os.path.join(self.tmp, 'none'))
        self.assertEqual([], self.openstack_json(
            'mlaccel', 'pool', 'list', '--config-file', empty))

    def test_show_never_shows_tokens(self):
        status, out, err = self.openstack(
            'mlaccel', 'pool', 'show', SPEC.key, '--config-file', self.conf)
        self.assertEqual(0, status, err)
        self.assertIn('s1 (n1): idle, 2 tasks', out)
        self.assertNotIn(TOKEN, out + err)
        shown = self.openstack_json('mlaccel', 'pool', 'show', SPEC.key,
                                    '--config-file', self.conf)
        self.assertNotIn(TOKEN, str(shown))
        self.assertEqual(SPEC.to_dict(), shown['spec'])
        [member] = shown['members']
        self.assertEqual(('s1', 'n1', 'idle', 2, None),
                         (member['server_id'], member['name'],
                          member['state'], member['tasks'],
                          member['holder']))
        self.assertGreater(member['idle_s'], 1e9)
        self.assertEqual((1, 3, 4), (shown['min'], shown['max'],
                                     shown['max_tasks']))

    def test_no_such_pool(self):
        for key in ('0123456789abcdef', 'not-a-key'):
            status, out, err = self.openstack(
                'mlaccel', 'pool', 'show', key, '--config-file', self.conf)
            self.assertEqual(1, status)
            self.assertEqual('', out)
            self.assertIn(key, err)

    def test_bad_configuration_is_one_message(self):
        bad = self.write('bad.conf', '[mlaccel_pool]\nlock_timeout = soon\n')
        for conf, words in ((os.path.join(self.tmp, 'nope.conf'),
                             ('not found', 'nope.conf')),
                            (bad, ('lock_timeout',))):
            status, out, err = self.openstack(
                'mlaccel', 'pool', 'list', '--config-file', conf)
            self.assertEqual(1, status)
            self.assertEqual('', out)
            self.assertEqual(1, len(err.splitlines()), err)
            for word in words:
                self.assertIn(word, err)
