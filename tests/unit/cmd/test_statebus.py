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

"""``mlaccel-statebus`` as a user runs it: a real process, a real file bus.

Every bad input gets one line on stderr, a non-zero status, no traceback,
and leaves nothing on disk.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import fixtures

from mlaccel.statebus import keys
from tests import fixtures as mlaccel_fixtures
from tests import testcase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class StatebusCommandTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.bus = os.path.join(self.tmp, 'bus')
        self.conf = self.write('mlaccel.conf', '[mlaccel_statebus]\n'
                               'backend_url = file://%s\n' % self.bus)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    @staticmethod
    def tree(root):
        """Every path under ``root`` with its size and modification time."""
        found = {}
        for top, dirs, files in os.walk(root):
            for name in dirs + files:
                st = os.lstat(os.path.join(top, name))
                found[os.path.join(top, name)] = (st.st_size, st.st_mtime_ns)
        return found

    def command(self, argv, config):
        """The command line and environment of ``mlaccel-statebus argv``."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [ROOT, os.environ.get('PYTHONPATH')])))
        env.pop('PYTHONWARNINGS', None)
        args = [sys.executable, '-m', 'mlaccel.cmd.statebus']
        if config:
            args += ['--config-file', self.conf]
        return args + list(argv), env

    def run_cmd(self, *argv, config=True, stdin=None):
        args, env = self.command(argv, config)
        return subprocess.run(args, cwd=self.tmp, env=env, input=stdin,
                              capture_output=True, text=True, timeout=120)

    def popen_cmd(self, *argv):
        args, env = self.command(argv, True)
        return subprocess.Popen(args, cwd=self.tmp, env=env, text=True,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)

    def signed_conf(self, deployment_key, host_key):
        """A config file of a signed bus with these key files; its path."""
        return self.write('k.conf', '[mlaccel_statebus]\n'
                          'backend_url = file://%s\n'
                          'deployment_key_file = %s\n'
                          'host_key_file = %s\n'
                          'publisher_state_dir = %s\n' % (
                              self.bus, deployment_key, host_key,
                              os.path.join(self.tmp, 'state')))

    def assert_refused(self, proc, *words):
        """One line on stderr naming ``words``; nothing new on disk."""
        self.assertNotEqual(0, proc.returncode, proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(1, len(lines), proc.stderr)
        self.assertTrue(lines[0].startswith('mlaccel-statebus: '), lines[0])
        for word in words:
            self.assertIn(word, lines[0])
        self.assertFalse(os.path.exists(self.bus))

    def test_missing_config_file(self):
        self.assert_refused(self.run_cmd(
            '--config-file', os.path.join(self.tmp, 'nope.conf'), 'show',
            config=False), 'nope.conf')

    def test_unparsable_config_file(self):
        bad = self.write('bad.conf', '[mlaccel_statebus\nbackend_url = x\n')
        self.assert_refused(self.run_cmd('--config-file', bad, 'show',
                                         config=False), 'bad.conf')

    def test_invalid_option_value(self):
        bad = self.write('bad.conf', '[mlaccel_statebus]\nbackend_url = '
                         'file://%s\nrefresh_interval = abc\n' % self.bus)
        self.assert_refused(self.run_cmd('--config-file', bad, 'show',
                                         config=False), 'refresh_interval')

    def test_publish_missing_file(self):
        self.assert_refused(self.run_cmd('publish', 'missing.json'),
                            'missing.json', 'No such file')

    def test_publish_json_array(self):
        self.write('r.json', '[{"host": "cmp1"}]')
        self.assert_refused(self.run_cmd('publish', 'r.json'),
                            'not an object')

    def test_publish_invalid_report_from_stdin(self):
        self.assert_refused(self.run_cmd('publish', '-', stdin='{"host": 1}'),
                            'host')

    def test_publish_bad_interval(self):
        self.write('r.json', '{"host": "cmp1"}')
        for value in ('-5', '0', 'nan', 'soon'):
            self.assert_refused(self.run_cmd('publish', 'r.json',
                                             '--interval', value),
                                '--interval')

    def test_unknown_backend_scheme(self):
        self.conf = self.write('x.conf', '[mlaccel_statebus]\n'
                               'backend_url = nosuch://u:pw-5@host/x\n')
        self.write('r.json', '{"host": "cmp1"}')
        for argv in (['show'], ['publish', '--once', 'r.json']):
            proc = self.run_cmd(*argv)
            self.assert_refused(proc, "unknown backend 'nosuch'")
            self.assertNotIn('pw-5', proc.stderr)

    def test_unsafe_deployment_key_file(self):
        key = self.write('dk', keys.generate())
        os.chmod(key, 0o644)
        self.conf = self.write('k.conf', '[mlaccel_statebus]\n'
                               'backend_url = file://%s\n'
                               'deployment_key_file = %s\n' % (self.bus, key))
        self.assert_refused(self.run_cmd('show'), 'accessible to other users')

    def test_show_needs_a_deployment_key(self):
        self.assert_refused(self.run_cmd('show'), 'deployment_key_file',
                            'allow_unsigned_reports')

    def test_show_creates_nothing(self):
        self.conf = self.write('u.conf', '[mlaccel_statebus]\n'
                               'backend_url = file://%s\n'
                               'allow_unsigned_reports = true\n' % self.bus)
        proc = self.run_cmd('show', '--json')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual([], json.loads(proc.stdout))
        self.assertFalse(os.path.exists(self.bus))

    def test_unreadable_bus_url_password_is_masked(self):
        redis = self.useFixture(mlaccel_fixtures.RedisServer())
        port = redis.port
        redis.kill()
        self.conf = self.write('r.conf', '[mlaccel_statebus]\n'
                               'backend_url = redis://u:pw-6@127.0.0.1:%d\n'
                               'allow_unsigned_reports = true\n' % port)
        proc = self.run_cmd('show')
        self.assertEqual(1, proc.returncode)
        self.assertIn('cannot be read', proc.stderr)
        self.assertIn('redis://u:***@127.0.0.1', proc.stderr)
        self.assertNotIn('pw-6', proc.stderr + proc.stdout)
        self.assertNotIn('Traceback', proc.stderr)

    def test_keygen_derive_publish_show(self):
        dk = os.path.join(self.tmp, 'deployment.key')
        hk = os.path.join(self.tmp, 'cmp1.key')
        proc = self.run_cmd('keygen', '--output', dk, config=False)
        self.assertEqual(0, proc.returncode, proc.stderr)
        proc = self.run_cmd('derive', '--deployment-key-file', dk,
                            '--host', 'cmp1', '--output', hk, config=False)
        self.assertEqual(0, proc.returncode, proc.stderr)
        for path in (dk, hk):
            self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        deployment = keys.read_deployment_keys(dk)
        self.assertEqual(keys.derive_all(deployment, ['cmp1']),
                         keys.read_host_keys(hk))

        self.conf = self.signed_conf(dk, hk)
        self.write('r.json', '{"host": "cmp1", "build_limit": 2}')
        proc = self.run_cmd('publish', '--once', 'r.json')
        self.assertEqual(0, proc.returncode, proc.stderr)
        before = self.tree(self.bus)
        proc = self.run_cmd('show', '--json')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(before, self.tree(self.bus))
        self.assertEqual(['cmp1'], [r['host'] for r in json.loads(
            proc.stdout)])
        self.assertEqual(2, json.loads(proc.stdout)[0]['build_limit'])
        self.assertEqual(deployment[0].id,
                         json.loads(proc.stdout)[0]['key_id'])

    def test_publish_repeats_until_interrupted(self):
        dk = os.path.join(self.tmp, 'deployment.key')
        hk = os.path.join(self.tmp, 'cmp1.key')
        keys.write_key(dk, keys.generate())
        keys.write_key(hk, keys.format_host_keys(keys.derive_all(
            keys.read_deployment_keys(dk), ['cmp1'])))
        self.conf = self.signed_conf(dk, hk)
        self.write('r.json', '{"host": "cmp1"}')
        proc = self.popen_cmd('publish', '--interval', '0.2', 'r.json')
        self.addCleanup(proc.kill)
        stamps = set()
        deadline = time.monotonic() + 60  # a hang guard only
        while len(stamps) < 2 and time.monotonic() < deadline:
            shown = self.run_cmd('show', '--json')
            stamps.update(r['timestamp'] for r in json.loads(shown.stdout))
        self.assertEqual(2, len(stamps), 'the report was not re-stamped')
        proc.send_signal(signal.SIGINT)
        self.assertEqual(0, proc.wait(60), proc.stderr.read())
        self.assertEqual([], json.loads(self.run_cmd('show',
                                                     '--json').stdout))

    def test_rotate_then_derive_both_keys(self):
        dk = os.path.join(self.tmp, 'deployment.key')
        hk = os.path.join(self.tmp, 'node.key')
        self.run_cmd('keygen', '--output', dk, config=False)
        old = keys.read_deployment_keys(dk)
        proc = self.run_cmd('rotate', '--deployment-key-file', dk,
                            config=False)
        self.assertEqual(0, proc.returncode, proc.stderr)
        new = keys.read_deployment_keys(dk)
        self.assertEqual(old, new[1:])
        self.assertIn(new[0].id, proc.stdout)
        proc = self.run_cmd('derive', '--deployment-key-file', dk,
                            '--host', 'node@a', '--host', 'node@b',
                            '--output', hk, config=False)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(keys.derive_all(new, ['node@a', 'node@b']),
                         keys.read_host_keys(hk))

    def test_keys_are_never_overwritten(self):
        dk = self.write('deployment.key', 'kept\n')
        proc = self.run_cmd('keygen', '--output', dk, config=False)
        self.assert_refused(proc, 'exists')
        proc = self.run_cmd('derive', '--deployment-key-file', dk, '--host',
                            'cmp1', '--output', dk, config=False)
        self.assert_refused(proc)
        with open(dk) as f:
            self.assertEqual('kept\n', f.read())

    def test_derive_refuses_a_short_secret_and_a_missing_host(self):
        dk = self.write('short.key', 'too short')
        os.chmod(dk, 0o600)
        out = os.path.join(self.tmp, 'out.key')
        self.assert_refused(self.run_cmd(
            'derive', '--deployment-key-file', dk, '--host', 'cmp1',
            '--output', out, config=False), 'at least 32 characters')
        self.assert_refused(self.run_cmd(
            'derive', '--deployment-key-file', dk, '--output', out,
            config=False), '--host')
        self.assertFalse(os.path.exists(out))
