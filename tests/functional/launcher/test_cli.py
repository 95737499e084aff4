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

"""``mlaccel launch`` end to end, as its own process, against Nova's harness.

The command runs in a subprocess exactly as its console script would
(``sys.exit(cli())``) and connects with openstacksdk from a ``clouds.yaml``
(``admin_token`` auth: a fixed token sent to a fixed endpoint) to Nova's
in-process API served on a loopback port by
:class:`tests.functional.launcher.httpapi.HTTPAPIServer`. The token stands
in for Keystone, which cannot run here (see
:class:`~tests.functional.launcher.httpapi.TokenIdentity`). The guests are
real ``mlaccel-taskd`` processes (:mod:`tests.functional.launcher.guest`);
they push readiness to the command's listener and run its task.
"""

import json
import os
import subprocess
import sys
import time

from testtools import content

from mlaccel import lifecycle
from tests.functional.launcher import base
from tests.functional.launcher import guest
from tests.functional.launcher import httpapi

CLI = 'import sys; from mlaccel.cmd.launch import cli; sys.exit(cli())'
#: Seconds a command may take before the test kills it and fails.
COMMAND_TIMEOUT = 180


class LaunchCommandTest(base.LauncherTestCase):

    def setUp(self):
        super().setUp()
        self.cloud = self.useFixture(
            httpapi.HarnessCloud(self.api_fixture.app()))
        self.http_api = self.cloud.http_api
        self.tmp = self.cloud.tmp
        self.clouds_yaml = self.cloud.clouds_yaml

    def _run(self, *args):
        """Run ``mlaccel launch ARGS``; return (status, stdout, stderr)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env.update(OS_CLIENT_CONFIG_FILE=self.clouds_yaml, HOME=self.tmp,
                   XDG_CONFIG_HOME=self.tmp)
        out = os.path.join(self.tmp, 'stdout')
        err = os.path.join(self.tmp, 'stderr')
        with open(out, 'wb') as stdout, open(err, 'wb') as stderr:
            process = subprocess.Popen(
                [sys.executable, '-c', CLI, 'launch'] + list(args),
                cwd=guest.REPO, env=env, stdout=stdout, stderr=stderr)
            # Polling with sleeps lets eventlet's hub serve the API meanwhile.
            deadline = time.monotonic() + COMMAND_TIMEOUT
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if process.poll() is None:
                process.kill()
                process.wait()
        with open(out) as stdout, open(err) as stderr:
            output, errors = stdout.read(), stderr.read()
        self.addDetail('command-stderr-%d' % len(self.getDetails()),
                       content.text_content(errors))
        self.assertIsNotNone(process.returncode)
        return process.returncode, output, errors

    def _launch_args(self, *extra):
        return ['--cloud', 'harness', '--image', base.IMAGE,
                '--flavor', base.FLAVOR, '--task', base.ECHO,
                '--listen', '127.0.0.1:0', '--preload', 'json',
                '--poll-interval', '0.5', '--timeout', '90'] + list(extra)

    def _created_servers(self):
        return [request for request in self.http_api.requests
                if request[0] == 'POST' and request[1].endswith('/servers')]

    def test_launch_writes_record_and_table_and_deletes(self):
        path = os.path.join(self.tmp, 'record.json')
        status, output, errors = self._run(*self._launch_args(
            '--count', '2', '--task-args', '{"x": 1}', '--seed', '7',
            '--output', path))
        self.assertEqual(0, status, errors)
        self.assertEqual(2, len(self._created_servers()))
        with open(path) as stream:
            result = json.load(stream)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual({'x': 1}, result['request']['args'])
        stages = [stage.value for stage in lifecycle.STAGES]
        self.assertEqual(['scheduling', 'creation', 'buffering', 'running'],
                         stages)
        self.assertEqual(2, len(result['vms']))
        for vm in result['vms']:
            self.assertEqual('succeeded', vm['state'])
            self.assertEqual({'x': 1}, vm['result']['args'])
            for stage in stages:
                duration = vm['timeline']['durations'][stage]
                self.assertIsNotNone(duration, (vm['name'], stage))
                self.assertGreaterEqual(duration, 0)
        for stage in stages:
            self.assertIsNotNone(result['timeline']['durations'][stage])
        self.assertEqual(
            sorted(vm['server_id'] for vm in result['vms']),
            result['cleanup']['deleted'])
        self.assertEqual([], result['cleanup']['leaked'])
        # The table: a header with the stages, a row per VM, the task row.
        lines = output.splitlines()
        self.assertEqual(stages, lines[0].split()[1:5])
        for vm in result['vms']:
            row = [line for line in lines
                   if line.split()[:1] == [vm['name']]]
            self.assertEqual(1, len(row), output)
            self.assertEqual('succeeded', row[0].split()[-1])
        self.assertTrue(any(line.startswith('task ')
                            and line.endswith('succeeded')
                            for line in lines), output)
        self.assertIn('(seconds; launch %s)' % result['launch_id'], output)
        self.assertIn('launch %s: created' % result['launch_id'], errors)
        self._assert_nothing_left()

    def test_bad_task_args_is_a_usage_error_and_creates_nothing(self):
        for task_args, message in (('{"x": ', 'not valid JSON'),
                                   ('[1, 2]', 'must be a JSON object')):
            status, output, errors = self._run(*self._launch_args(
                '--task-args', task_args))
            self.assertEqual(2, status, errors)
            self.assertIn('--task-args', errors)
            self.assertIn(message, errors)
            self.assertEqual('', output)
        self.assertEqual([], self.http_api.requests)
        self._assert_nothing_left()

    def test_unknown_server_group_fails_before_creating(self):
        status, output, errors = self._run(*self._launch_args(
            '--server-group', 'no-such-group'))
        self.assertEqual(1, status, errors)
        self.assertIn('no-such-group', errors)
        self.assertNotEqual([], self.http_api.requests)  # it did connect
        self.assertEqual([], self._created_servers())
        self._assert_nothing_left()

    def test_refused_token_fails_cleanly(self):
        self.cloud.write_clouds('forged')
        status, output, errors = self._run(*self._launch_args())
        self.assertEqual(1, status, errors)
        self.assertIn('401', errors)
        self.assertEqual([], self._created_servers())
        self._assert_nothing_left()
