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

"""``mlaccel launch`` as its own process takes members of a warm pool."""

import json
import os
import signal
import subprocess
import sys
import time


from mlaccel.pool import members as pool_members
from tests.functional.launcher import base
from tests.functional.launcher import guest
from tests.functional.launcher import httpapi
from tests.functional.launcher import test_cli
from tests.functional.pool import base as pool_base


class PooledLaunchCommandTest(pool_base.PoolTestCase):
    """The command in its own process, with a pool configured.

    As in :mod:`tests.functional.launcher.test_cli`.
    """

    _run = test_cli.LaunchCommandTest._run
    _launch_args = test_cli.LaunchCommandTest._launch_args
    _created_servers = test_cli.LaunchCommandTest._created_servers

    def setUp(self):
        super().setUp()
        self.cloud = self.useFixture(
            httpapi.HarnessCloud(self.api_fixture.app()))
        self.http_api = self.cloud.http_api
        self.tmp = self.cloud.tmp
        self.clouds_yaml = self.cloud.clouds_yaml

    def _config(self):
        path = os.path.join(self.tmp, 'mlaccel.conf')
        conf = pool_base.mlaccel_conf.CONF
        with open(path, 'w') as stream:
            # A token without a catalog names no project: the
            # configuration does.
            stream.write('[mlaccel_pool]\nstate_dir = %s\ninterval = 0.2\n'
                         'project_id = %s\n'
                         '[mlaccel_launcher]\nlisten_host = 127.0.0.1\n'
                         'poll_interval = 0.5\n'
                         '[mlaccel_statebus]\nbackend_url = %s\n'
                         % (self.store_dir, pool_base.nova_fixtures.PROJECT_ID,
                            conf.mlaccel_statebus.backend_url))
        return path

    def test_launch_takes_pooled_members_first(self):
        self.create_pool(2, 2)
        self.manager().run_once()
        pooled = sorted(m['server_id'] for m in self.idle())
        path = os.path.join(self.tmp, 'record.json')
        status, output, errors = self._run(*self._launch_args(
            '--count', '3', '--output', path,
            '--config-file', self._config()))
        self.assertEqual(0, status, errors)
        with open(path) as stream:
            result = json.load(stream)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        # Only the shortfall was created.
        self.assertEqual(1, len(self._created_servers()))
        self.assertEqual(pooled, result['cleanup']['returned'])
        self.assertEqual(pooled, sorted(m['server_id'] for m in self.idle()))
        self.assert_only_members_left()

    def test_no_pool_flag_creates_every_vm(self):
        self.create_pool(1, 1)
        self.manager().run_once()
        status, output, errors = self._run(*self._launch_args(
            '--count', '1', '--no-pool', '--config-file', self._config()))
        self.assertEqual(0, status, errors)
        self.assertEqual(1, len(self._created_servers()))
        self.assertEqual(1, len(self.idle()))
        self.assert_only_members_left()

    def _env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env.update(OS_CLIENT_CONFIG_FILE=self.clouds_yaml, HOME=self.tmp,
                   XDG_CONFIG_HOME=self.tmp)
        return env

    def _command(self, command, *args):
        return subprocess.Popen(
            [sys.executable, '-c', 'import sys; from mlaccel.cmd import '
             '%s; sys.exit(%s.main(sys.argv[1:]))' % (command, command)]
            + list(args),
            cwd=guest.REPO, env=self._env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)

    def _finish(self, process, timeout=60):
        # Polling with sleeps lets eventlet's hub serve the API meanwhile.
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
        out, err = process.communicate()
        return process.returncode, out, err

    def test_pool_create_and_manager_console_script(self):
        conf = self._config()
        status, out, err = self._finish(self._command(
            'pool', 'create', '--cloud', 'harness', '--image', base.IMAGE,
            '--flavor', 'm1.tiny', '--preload', 'json', '--min', '1',
            '--max', '2', '--config-file', conf))
        self.assertEqual(0, status, err)
        # Names resolved to ids: the key a launch of this kind looks for.
        self.assertEqual(self.key, out.strip())
        manager = self._command('pool_manager', '--cloud', 'harness',
                                '--config-file', conf)
        try:
            self._wait_until(lambda: len(self.idle()) == 1 or
                             manager.poll() is not None, 'a warm member')
            self.assertIsNone(manager.poll())
        finally:
            manager.send_signal(signal.SIGTERM)
            status, _, err = self._finish(manager)
        self.assertEqual(0, status, err)
        self.assertIsNone(pool_members.idle_health(self.idle()[0]))
        self.assert_only_members_left()
        status, _, err = self._finish(self._command(
            'pool_manager', '--config-file', '/nonexistent.conf'))
        self.assertEqual(2, status)
        self.assertIn('nonexistent.conf', err)

    def test_manager_killed_mid_refill_leaves_no_orphan(self):
        self.create_pool(3, 3)
        manager = self._command('pool_manager', '--cloud', 'harness',
                                '--config-file', self._config())
        try:
            # Killed once Nova has its first member, before any is recorded.
            self._wait_until(lambda: self.servers() or
                             manager.poll() is not None, 'a first member')
            manager.kill()
            self._finish(manager)
        finally:
            if manager.poll() is None:
                manager.kill()
        self.assertEqual(-signal.SIGKILL, manager.returncode)
        made = set(self.servers())
        recorded = set(self.state()['members'])
        self.assertTrue(made - recorded)
        # A new manager reconciles: the unrecorded ones are deleted, the
        # pool is refilled, each member counted once.
        self.manager().run_once()
        state = self.state()
        self.assertEqual(3, len(state['members']))
        self.assertFalse(set(state['members']) & (made - recorded))
        self.assertEqual(3, state['stats']['created'])
        self.assert_only_members_left()
