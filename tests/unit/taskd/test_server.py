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

"""The daemon's sockets: bad input, foreign peers, tokens, readiness."""

import errno
import json
import os
import random
import socket
import subprocess
import sys


from mlaccel import readiness
from mlaccel.taskd import client
from mlaccel.taskd import protocol
from tests import testcase
from tests.unit.taskd import base

NOBODY = 65534


def connect_as(uid, path):
    """Connect to ``path`` and ask for health as ``uid`` in a forked child.

    Returns ``("refused", errno)`` or ``("reply", reply dict)``.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.settimeout(10)
                    sock.connect(path)
                    try:
                        sock.sendall(protocol.encode(
                            protocol.request('health')))
                    except BrokenPipeError:
                        pass    # refused and closed before we sent
                    outcome = ['reply', json.loads(
                        sock.makefile('rb').readline())]
            except OSError as exc:
                outcome = ['refused', exc.errno]
            os.write(write_fd, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, 'rb') as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return tuple(json.loads(data))


class TestBadInput(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.daemon = self.useFixture(base.Daemon(max_request_bytes=1024))

    def exchange(self, payload):
        return base.raw_exchange(self.daemon.socket_path, payload)

    def assert_alive(self):
        with self.daemon.client() as conn:
            self.assertEqual('ready', conn.health()['state'])

    def test_each_bad_line_gets_an_error_and_the_connection_lives(self):
        replies = self.exchange(
            b'not json\n'
            b'{"v": 1, "op": "format_disk", "id": 1}\n'
            b'{"v": 7, "op": "health", "id": 2}\n'
            b'{"v": 1, "op": "status", "task": "nope", "id": 3}\n'
            + b'{"v": 1, "pad": "' + b'x' * 5000 + b'"}\n'
            b'{"v": 1, "op": "health", "id": 4}\n')
        self.assertEqual(
            [protocol.MALFORMED, protocol.UNKNOWN_OP, protocol.UNSUPPORTED,
             protocol.INVALID, protocol.TOO_LARGE],
            [r['error']['code'] for r in replies[:5]])
        self.assertEqual([None, 1, 2, 3, None],
                         [r['id'] for r in replies[:5]])
        self.assertTrue(replies[5]['ok'])
        self.assertEqual(4, replies[5]['id'])

    def test_random_garbage_is_answered_and_survived(self):
        rng = random.Random(1234)
        for _ in range(20):
            payload = bytes(rng.getrandbits(8)
                            for _ in range(rng.randint(1, 3000)))
            replies = self.exchange(payload)
            lines = [line for line in payload.split(b'\n') if line.strip()]
            self.assertEqual(len(lines), len(replies))
            self.assertFalse(any(r['ok'] for r in replies))
        self.assert_alive()

    def test_endless_line_is_discarded(self):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(self.daemon.socket_path)
            for _ in range(100):
                sock.sendall(b'z' * 65536)
            sock.sendall(b'\n' + protocol.encode(
                protocol.request('health', 'after')))
            lines = sock.makefile('rb')
            self.assertEqual(protocol.TOO_LARGE,
                             json.loads(lines.readline())['error']['code'])
            self.assertEqual('after', json.loads(lines.readline())['id'])
        self.assert_alive()

    def test_client_reports_error_replies(self):
        with self.daemon.client() as conn:
            err = self.assertRaises(client.TaskdError, conn.call, 'explode')
            self.assertEqual(protocol.UNKNOWN_OP, err.code)
            self.assertIn('ready', conn.health()['state'])


class TestAccess(testcase.TestCase):

    def test_foreign_uid_refused(self):
        if os.geteuid() != 0:
            self.skipTest('needs root to run a client as another uid')
        daemon = self.useFixture(base.Daemon())
        self.assertEqual(0o600, os.stat(daemon.socket_path).st_mode & 0o777)
        self.assertEqual(('refused', errno.EACCES),
                         connect_as(NOBODY, daemon.socket_path))
        # Even with the file mode opened up, the peer-uid check refuses.
        os.chmod(daemon.socket_path, 0o666)
        kind, reply = connect_as(NOBODY, daemon.socket_path)
        self.assertEqual('reply', kind, reply)
        self.assertEqual(protocol.FORBIDDEN, reply['error']['code'])
        self.assertIn('uid %d' % NOBODY, reply['error']['message'])
        self.assertEqual('reply', connect_as(0, daemon.socket_path)[0])

    def _tcp_daemon(self):
        token_dir = self.useFixture(base.fixtures.TempDir()).path
        token_file = os.path.join(token_dir, 'token')
        with open(token_file, 'w') as out:
            out.write('s3cret-token\n')
        os.chmod(token_file, 0o600)
        daemon = self.useFixture(base.Daemon(tcp_address='127.0.0.1:0',
                                             token_file=token_file))
        with daemon.client() as conn:
            return conn.health()['addresses'][1]

    def test_tcp_token(self):
        address = self._tcp_daemon()
        self.assertTrue(address.startswith('tcp:127.0.0.1:'))
        with client.TaskdClient(address, token='s3cret-token') as conn:
            self.assertEqual('ready', conn.health()['state'])
        for token in (None, 'wrong', 's3cret-tokeN', ''):
            with client.TaskdClient(address, token=token) as conn:
                err = self.assertRaises(client.TaskdError, conn.health)
                self.assertEqual(protocol.UNAUTHORIZED, err.code)
                # The daemon closed the connection after the refusal.
                self.assertRaises(OSError, conn.call, 'health')

    def test_tcp_without_token_refuses_to_start(self):
        daemon = self.useFixture(base.Daemon(wait_ready=False,
                                             tcp_address='127.0.0.1:0'))
        self.assertEqual(2, daemon.process.wait(60))
        self.assertIn('a TCP address needs a token', daemon.output())
        self.assertFalse(os.path.exists(daemon.socket_path))


class TestStartup(testcase.TestCase):

    def _refused(self, **options):
        daemon = self.useFixture(base.Daemon(wait_ready=False, **options))
        self.assertEqual(2, daemon.process.wait(60))
        return daemon.output()

    def test_failed_preload_refuses_to_start(self):
        output = self._refused(preload=['json', 'no_such_module_xyz'])
        self.assertIn('cannot start: cannot preload module '
                      'no_such_module_xyz: ModuleNotFoundError', output)

    def test_failed_warmup_refuses_to_start(self):
        output = self._refused(
            preload=['tests.unit.taskd.sample_tasks:warm_fail'])
        self.assertIn('warm-up hook tests.unit.taskd.sample_tasks:warm_fail '
                      'failed: ImportError', output)

    def test_live_socket_is_not_taken_over(self):
        first = self.useFixture(base.Daemon())
        second = subprocess.run(
            [sys.executable, '-m', 'mlaccel.cmd.taskd', '--config-file',
             first.conf_path], cwd=base.REPO, capture_output=True,
            text=True, timeout=60)
        self.assertEqual(2, second.returncode)
        self.assertIn('another daemon listens on', second.stderr)
        with first.client() as conn:
            self.assertEqual('ready', conn.health()['state'])

    def test_readiness_is_pushed(self):
        listener = self.useFixture(base.ReadyListener())
        daemon = self.useFixture(base.Daemon(
            wait_ready=False, ready_url=listener.url('vm-42'),
            preload=['json', 'tests.unit.taskd.sample_tasks']))
        arrived, path, body = listener.received.get(timeout=60)
        self.assertEqual('/ready/vm-42', path)
        self.assertEqual('vm-42', body['key'])
        self.assertEqual(daemon.address, body['address'])
        self.assertEqual(daemon.process.pid, body['pid'])
        self.assertEqual(['json', 'tests.unit.taskd.sample_tasks'],
                         body['preloaded'])
        self.assertLessEqual(body['ready_at'], arrived)
        # It was pushed once the daemon could serve.
        with daemon.client() as conn:
            self.assertEqual(body['ready_at'], conn.health()['ready_at'])

    def test_readiness_push_is_signed_with_the_token(self):
        listener = self.useFixture(base.ReadyListener())
        token_dir = self.useFixture(base.fixtures.TempDir()).path
        token_file = os.path.join(token_dir, 'token')
        with open(token_file, 'w') as out:
            out.write('the-vm-token\n')
        os.chmod(token_file, 0o600)
        self.useFixture(base.Daemon(
            wait_ready=False, ready_url=listener.url('vm-7'),
            token_file=token_file))
        body, signature = listener.signatures.get(timeout=60)
        self.assertEqual(readiness.sign('the-vm-token', body), signature)
        self.assertNotEqual(readiness.sign('another-token', body), signature)
