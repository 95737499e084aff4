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

"""Attacks on the daemon by its clients and the network, each refused.

Resource limits are the operator's ceiling, only registered or allowed
tasks run, tasks run as the task user, and the TCP listener serves TLS.
"""

import os
import pwd
import resource
import socket
import ssl
import subprocess
import sys
import time

import fixtures

from mlaccel.taskd import catalog
from mlaccel.taskd import client
from mlaccel.taskd import protocol
from mlaccel import tls
from tests import testcase
from tests.unit.taskd import base

S = base.SAMPLE
NOBODY = 'nobody'


def as_root_drop_to_nobody():
    """Daemon options that make tasks unprivileged when the test is root."""
    return {'task_user': NOBODY} if os.geteuid() == 0 else {}


class TestLimitsAreTheOperatorsCeiling(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.daemon = self.useFixture(base.Daemon(
            task_limits='nofile:200', **as_root_drop_to_nobody()))
        self.client = self.daemon.client()
        self.addCleanup(self.client.close)

    def run_task(self, name, args, **kwargs):
        return self.client.wait(self.client.submit(S + name, args, **kwargs),
                                timeout=60)

    def test_empty_limits_remove_nothing(self):
        # Before, {} replaced the configured limits: none were set.
        status = self.run_task('raise_limit', {'to': 100}, limits={})
        self.assertEqual([200, 200], status['result']['before'])

    def test_request_may_lower_but_not_raise(self):
        status = self.run_task('raise_limit', {'to': 50},
                               limits={'nofile': 100})
        self.assertEqual([100, 100], status['result']['before'])
        err = self.assertRaises(client.TaskdError, self.client.submit,
                                S + 'raise_limit', {'to': 1},
                                limits={'nofile': 4096})
        self.assertEqual(protocol.INVALID, err.code)
        self.assertIn('may only lower', err.message)

    def test_limit_not_configured_cannot_exceed_the_daemons(self):
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        if hard == resource.RLIM_INFINITY:
            self.skipTest('the test runs without a hard RLIMIT_NPROC')
        err = self.assertRaises(client.TaskdError, self.client.submit,
                                S + 'echo', limits={'nproc': hard + 1})
        self.assertEqual(protocol.INVALID, err.code)

    def test_task_cannot_raise_its_own_limit_back(self):
        # Before, only the soft limit was set: the task raised it again.
        status = self.run_task('raise_limit', {'to': 1024})
        self.assertEqual('succeeded', status['state'], status['error'])
        self.assertFalse(status['result']['raised'])
        self.assertEqual([200, 200], status['result']['after'])

    def test_worker_runs_under_the_operators_limits(self):
        status = self.run_task('raise_limit', {'to': 1024}, mode='worker')
        self.assertEqual([200, 200], status['result']['before'])
        self.assertFalse(status['result']['raised'])


class TestOnlyRegisteredOrAllowedTasks(testcase.TestCase):

    def test_arbitrary_functions_are_refused_by_default(self):
        daemon = self.useFixture(base.Daemon(allowed_tasks=''))
        with daemon.client() as conn:
            # Before, os:system passed and ran a shell command.
            for entry in ('os:system', S + 'echo'):
                err = self.assertRaises(client.TaskdError, conn.submit,
                                        entry, {})
                self.assertEqual(protocol.FORBIDDEN, err.code, entry)
            err = self.assertRaises(client.TaskdError, conn.submit,
                                    'no_such_task', {})
            self.assertEqual(protocol.INVALID, err.code)
            self.assertIn('clip', err.message)
            # The registered task runs by name (and refuses a bad argument
            # before it imports torch).
            status = conn.wait(conn.submit('clip', {'stpes': 1}), 60)
            self.assertEqual('clip', status['entry'])
            self.assertIn('unknown clip task argument(s): stpes',
                          status['error'])

    def test_catalog_patterns(self):
        tasks = catalog.Catalog(['pkg.tasks:*'], tasks={'t': 'pkg.t:main'})
        self.assertEqual('pkg.t:main', tasks.target('t'))
        self.assertEqual('pkg.t:main', tasks.target('pkg.t:main'))
        self.assertEqual('pkg.tasks:run', tasks.target('pkg.tasks:run'))
        self.assertRaises(PermissionError, tasks.target, 'pkg.tasksx:run')
        self.assertRaises(PermissionError, tasks.target, 'os:system')
        self.assertRaises(LookupError, tasks.target, 'u')
        self.assertEqual('os:system', catalog.Catalog(
            ['*'], tasks={}).target('os:system'))
        for bad in ('os', 'os:', 'a b:c', ''):
            self.assertRaises(ValueError, catalog.Catalog, [bad], tasks={})
        self.assertEqual('mlaccel.tasks.clip:main',
                         catalog.registered()['clip'])


class TestInheritedHandles(testcase.TestCase):

    def test_task_holds_no_handle_on_other_processes(self):
        daemon = self.useFixture(base.Daemon(workers=2))
        with daemon.client() as conn:
            # Another task runs: the daemon holds a pidfd on it.
            other = conn.submit(S + 'sleep', {'seconds': 30})
            for mode in ('fork', 'worker'):
                status = conn.wait(conn.submit(S + 'handles', mode=mode), 60)
                self.assertEqual({'pidfds': 0, 'sockets': 0},
                                 status['result'], mode)
            conn.cancel(other)


class TestTaskUser(testcase.TestCase):

    def test_tasks_run_as_the_task_user(self):
        if os.geteuid() != 0:
            self.skipTest('needs root to switch users')
        nobody = pwd.getpwnam(NOBODY)
        daemon = self.useFixture(base.Daemon(task_user=NOBODY))
        with daemon.client() as conn:
            for mode in ('fork', 'worker'):
                status = conn.wait(conn.submit(S + 'identity', mode=mode), 60)
                self.assertEqual('succeeded', status['state'],
                                 status['error'])
                result = status['result']
                self.assertEqual(nobody.pw_uid, result['uid'], mode)
                self.assertEqual(nobody.pw_uid, result['euid'])
                self.assertEqual(nobody.pw_gid, result['gid'])
                self.assertNotIn(0, result['groups'])
                self.assertEqual(nobody.pw_dir, result['home'])
                self.assertEqual('written as uid %d\n' % nobody.pw_uid,
                                 conn.logs(status['id']))


class TestTaskCannotReachItsDaemon(testcase.TestCase):
    """A task of one holder must not reach the daemon of a later one.

    Before, tasks ran as the daemon's user: a task could kill the daemon
    or plant a ``.pth`` file its restart would run, and so see the next
    holder's token and tasks.
    """

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest('needs root: the daemon drops tasks to %s'
                          % NOBODY)
        secrets = self.useFixture(fixtures.TempDir()).path
        self.token_file = os.path.join(secrets, 'token')
        with open(self.token_file, 'w') as out:
            out.write('the-holders-token')
        os.chmod(self.token_file, 0o600)
        self.daemon = self.useFixture(base.Daemon(
            task_user=NOBODY, token_file=self.token_file))

    def test_task_cannot_signal_read_or_change_the_daemon(self):
        log_dir = os.path.join(self.daemon.dir, 'logs')
        args = {'daemon_pid': self.daemon.process.pid,
                'socket': self.daemon.socket_path,
                'token_file': self.token_file,
                'directories': [self.daemon.dir, log_dir,
                                os.path.dirname(self.token_file)]}
        with self.daemon.client() as conn:
            for mode in ('fork', 'worker'):
                status = conn.wait(conn.submit(S + 'reach_daemon', args,
                                               mode=mode), 60)
                self.assertEqual('succeeded', status['state'],
                                 status['error'])
                tried = status['result']
                self.assertEqual('PermissionError', tried.pop('signal'))
                self.assertEqual('PermissionError', tried.pop('socket'))
                self.assertEqual('PermissionError', tried.pop('token'))
                self.assertEqual(['PermissionError'], tried.pop('sys.path'))
                self.assertEqual({name: 'PermissionError' for name in tried},
                                 tried, mode)
        self.assertIsNone(self.daemon.process.poll())

    def test_code_writable_by_the_task_user_is_refused(self):
        planted = self.useFixture(fixtures.TempDir()).path
        nobody = pwd.getpwnam(NOBODY)
        os.chown(planted, nobody.pw_uid, nobody.pw_gid)
        proc = subprocess.run(
            [sys.executable, '-m', 'mlaccel.cmd.taskd', '--config-file',
             self.daemon.conf_path, '--socket',
             os.path.join(self.daemon.dir, 'other.sock')],
            cwd=base.REPO, env=dict(os.environ, PYTHONPATH=planted),
            capture_output=True, text=True, timeout=60)
        self.assertEqual(2, proc.returncode, proc.stderr)
        self.assertIn('task_user %s may write to %s' % (NOBODY, planted),
                      proc.stderr)


class TestNewHolder(testcase.TestCase):
    """A rekey hands the daemon over: no worker of the last holder stays."""

    def test_worker_state_does_not_survive_a_rekey(self):
        secrets = self.useFixture(fixtures.TempDir()).path
        token_file = os.path.join(secrets, 'token')
        with open(token_file, 'w') as out:
            out.write('the-first-holders-token')
        os.chmod(token_file, 0o600)
        daemon = self.useFixture(base.Daemon(
            token_file=token_file, **as_root_drop_to_nobody()))

        def run(conn):
            status = conn.wait(conn.submit(S + 'leave_thread',
                                           mode='worker'), 60)
            self.assertEqual('succeeded', status['state'], status['error'])
            return status['result']

        with daemon.client() as conn:
            first = run(conn)
            # Within one holder the worker persists, with what its tasks
            # left in it.
            self.assertEqual(dict(first, threads_left=1), run(conn))
            self.assertTrue(conn.rekey('the-next-holders-token')['rekeyed'])
            after = run(conn)
        self.assertNotEqual(first['pid'], after['pid'])
        self.assertEqual(0, after['threads_left'])


class TestTasksAsTheDaemonsUser(testcase.TestCase):

    def test_warning_without_a_task_user(self):
        daemon = self.useFixture(base.Daemon())
        base.wait_for(lambda: 'Tasks run as the daemon' in daemon.output(),
                      what='the warning')
        self.assertIn('uid %d' % os.geteuid(), daemon.output())


class TestTls(testcase.TestCase):

    def setUp(self):
        super().setUp()
        secrets = self.useFixture(fixtures.TempDir()).path
        self.identity = tls.new_identity('taskd')
        cert = os.path.join(secrets, 'cert.pem')
        key = os.path.join(secrets, 'key.pem')
        self.identity.write(cert, key)
        token_file = os.path.join(secrets, 'token')
        with open(token_file, 'w') as out:
            out.write('tls-test-token')
        os.chmod(token_file, 0o600)
        self.daemon = self.useFixture(base.Daemon(
            tcp_address='127.0.0.1:0', token_file=token_file,
            tls_cert_file=cert, tls_key_file=key, auth_timeout=2.0))
        with self.daemon.client() as conn:
            self.address = conn.health()['addresses'][1]

    def test_pinned_client_is_served(self):
        with client.TaskdClient(self.address, token='tls-test-token',
                                pinned_cert_pem=self.identity.cert_pem) as c:
            self.assertEqual('ready', c.health()['state'])

    def test_clear_text_gets_no_reply(self):
        # The token sent in clear text is not answered: the daemon waits
        # for a TLS handshake, then gives up.
        with client.TaskdClient(self.address, token='tls-test-token') as c:
            self.assertRaises(OSError, c.health)

    def test_other_certificate_is_refused_before_the_token_is_sent(self):
        other = tls.new_identity('impostor').cert_pem
        with client.TaskdClient(self.address, token='tls-test-token',
                                pinned_cert_pem=other) as c:
            self.assertRaises(ssl.SSLError, c.health)

    def test_slow_handshake_is_cut_off(self):
        host, port = protocol.parse_tcp_address(self.address[4:])
        with socket.create_connection((host, port), timeout=10) as sock:
            # A TLS record header announcing 16 KiB, then a byte at a time:
            # each read is quick, the whole never ends.
            header = b'\x16\x03\x01\x40\x00'
            deadline = time.monotonic() + 20
            closed = False
            for byte in header + b'\x01' * 200:
                if time.monotonic() > deadline:
                    break
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                time.sleep(0.1)
            if not closed:
                try:
                    sock.settimeout(1)
                    closed = sock.recv(1) == b''
                except ConnectionResetError:
                    closed = True
                except socket.timeout:
                    closed = False
        self.assertTrue(closed, 'the daemon kept a slow handshake open')
