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

"""Starting mlaccel-taskd with bad configuration: one line, exit 2, no mess.

Every option is checked before anything is written; a failed start leaves
neither the socket nor a directory it made behind.
"""

import os
import socket
import stat
import subprocess
import sys

import fixtures

from mlaccel import tls
from tests import testcase
from tests.unit.taskd import base


class StartTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # Neither exists before the start; neither may exist after it.
        self.run_dir = os.path.join(self.dir, 'run', 'mlaccel')
        self.log_dir = os.path.join(self.dir, 'log', 'tasks')
        self.socket_path = os.path.join(self.run_dir, 'taskd.sock')

    def start(self, *args, options=None, text=None):
        """Run the daemon with a config file; return the finished process.

        A daemon that did start is stopped and makes the test fail.
        """
        conf = os.path.join(self.dir, 'taskd.conf')
        if text is None:
            opts = dict({'socket_path': self.socket_path,
                         'log_dir': self.log_dir, 'workers': 0},
                        **(options or {}))
            text = '[mlaccel_taskd]\n' + ''.join(
                '%s = %s\n' % item for item in opts.items())
        with open(conf, 'w') as out:
            out.write(text)
        argv = [sys.executable, '-m', 'mlaccel.cmd.taskd']
        argv += list(args) if args else ['--config-file', conf]
        try:
            return subprocess.run(argv, cwd=base.REPO, capture_output=True,
                                  text=True, timeout=20)
        except subprocess.TimeoutExpired:
            self.fail('the daemon started:\n%s' % self.socket_path)

    def assert_refused(self, proc, *fragments):
        self.assertEqual(2, proc.returncode, proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(1, len(lines), proc.stderr)
        self.assertTrue(lines[0].startswith('mlaccel-taskd: '), lines[0])
        self.assertNotIn('Traceback', proc.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        self.assertFalse(os.path.exists(self.socket_path))
        self.assertFalse(os.path.exists(os.path.join(self.dir, 'run')))
        self.assertFalse(os.path.exists(os.path.join(self.dir, 'log')))


class TestBadConfiguration(StartTestCase):

    def test_missing_config_file(self):
        self.assert_refused(self.start(
            '--config-file', os.path.join(self.dir, 'nope.conf')),
            'nope.conf')

    def test_unparsable_config_file(self):
        self.assert_refused(self.start(text='grace_period = 3\n[oops\n'),
                            'taskd.conf')

    def test_invalid_values_are_refused_at_start(self):
        # Before, grace_period = abc was accepted and crashed on SIGTERM.
        for name, value, fragment in [
                ('grace_period', 'abc', 'grace_period'),
                ('workers', '-1', 'workers'),
                ('max_connections', 'many', 'max_connections'),
                ('task_limits', 'nofile:lots', 'nofile'),
                ('task_limits', 'bogus:1', 'bogus'),
                ('allowed_tasks', 'os.system', 'allowed_tasks'),
                ('tcp_address', 'nowhere', 'nowhere'),
                ('preload', 'a:', 'preload'),
                ('task_user', 'no-such-user-xyz', 'task_user'),
                ('ready_url', 'ftp://launcher/ready/k', 'ready_url')]:
            self.assert_refused(self.start(options={name: value}), fragment)

    def test_failed_bind_leaves_nothing_behind(self):
        with socket.socket() as taken:
            taken.bind(('127.0.0.1', 0))
            taken.listen()
            port = taken.getsockname()[1]
            token = os.path.join(self.dir, 'token')
            with open(token, 'w') as out:
                out.write('a-token-for-the-test')
            os.chmod(token, 0o600)
            self.assert_refused(self.start(options={
                'tcp_address': '127.0.0.1:%d' % port, 'token_file': token}),
                'Address already in use')

    def test_https_ready_url_needs_the_listener_certificate(self):
        self.assert_refused(self.start(options={
            'ready_url': 'https://127.0.0.1:1/ready/k'}), 'ready_cafile')


class TestSecretsAtStart(StartTestCase):

    def token_file(self, mode):
        path = os.path.join(self.dir, 'token')
        with open(path, 'w') as out:
            out.write('a-token-for-the-test')
        os.chmod(path, mode)
        return path

    def test_token_file_readable_by_others_is_refused(self):
        for mode in (0o644, 0o640, 0o602):
            self.assert_refused(self.start(options={
                'tcp_address': '127.0.0.1:0',
                'token_file': self.token_file(mode)}),
                'mode %04o' % mode, 'chmod 600')

    def test_non_loopback_tcp_needs_tls(self):
        self.assert_refused(self.start(options={
            'tcp_address': '0.0.0.0:0', 'token_file': self.token_file(0o600)}),
            'tls_cert_file', 'insecure_tcp')

    def test_tls_key_readable_by_others_is_refused(self):
        cert = os.path.join(self.dir, 'cert.pem')
        key = os.path.join(self.dir, 'key.pem')
        tls.new_identity('taskd').write(cert, key)
        os.chmod(key, 0o644)
        self.assert_refused(self.start(options={
            'tcp_address': '0.0.0.0:0', 'token_file': self.token_file(0o600),
            'tls_cert_file': cert, 'tls_key_file': key}), 'TLS key file')
        self.assertTrue(stat.S_ISREG(os.stat(key).st_mode))
