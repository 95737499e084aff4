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

"""Connection slots under careless and hostile peers.

Unauthenticated TCP peers hold no connection slot, are cut off after
auth_timeout and learn nothing about the protocol; idle connections are
closed, so idle peers cannot lock real clients out.
"""

import json
import os
import socket
import time

import fixtures

from mlaccel.taskd import client
from mlaccel.taskd import protocol
from tests import testcase
from tests.unit.taskd import base

TOKEN = 'connection-test-token'


def closed_by_peer(sock, timeout=10):
    """Read until the daemon closes ``sock``; the lines it sent."""
    sock.settimeout(timeout)
    data = b''
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


class TcpDaemonTestCase(testcase.TestCase):
    """A daemon with four slots, on Unix and loopback TCP with a token."""

    auth_timeout = 0.5

    def setUp(self):
        super().setUp()
        token_dir = self.useFixture(fixtures.TempDir()).path
        token_file = os.path.join(token_dir, 'token')
        with open(token_file, 'w') as out:
            out.write(TOKEN)
        os.chmod(token_file, 0o600)
        self.daemon = self.useFixture(base.Daemon(
            tcp_address='127.0.0.1:0', token_file=token_file,
            max_connections=4, auth_timeout=self.auth_timeout,
            idle_timeout=1.0))
        with self.daemon.client() as conn:
            self.tcp = conn.health()['addresses'][1]
        self.host, self.port = protocol.parse_tcp_address(self.tcp[4:])

    def raw_tcp(self):
        sock = socket.create_connection((self.host, self.port), timeout=10)
        self.addCleanup(sock.close)
        return sock


class TestConnections(TcpDaemonTestCase):

    def test_idle_unauthenticated_peers_are_cut_off(self):
        idle = [self.raw_tcp() for _ in range(4)]
        # Before the fix, these four held every slot: "busy".
        with self.daemon.client() as conn:
            self.assertEqual('ready', conn.health()['state'])
        for sock in idle:
            self.assertEqual([], closed_by_peer(sock))
        with client.TaskdClient(self.tcp, token=TOKEN) as conn:
            self.assertEqual('ready', conn.health()['state'])

    def test_slow_unauthenticated_peer_is_cut_off(self):
        sock = self.raw_tcp()
        line = protocol.encode(protocol.request('health', token=TOKEN))
        # One byte at a time, each well within any per-read timeout: the
        # deadline is for the whole authentication.
        for byte in line[:-1]:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
        self.assertEqual([], closed_by_peer(sock))

    def test_unauthenticated_peer_learns_nothing(self):
        for request in (b'{"v": 1, "op": "reboot", "id": 1}\n',
                        b'{"v": 9, "op": "health", "id": 2}\n',
                        b'{"v": 1, "op": "submit", "token": "x"}\n',
                        b'garbage\n'):
            sock = self.raw_tcp()
            sock.sendall(request)
            replies = closed_by_peer(sock)
            self.assertEqual([protocol.error(
                None, protocol.UNAUTHORIZED, 'missing or wrong token')],
                replies, request)

    def test_idle_connection_is_closed(self):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(self.daemon.socket_path)
            sock.sendall(protocol.encode(protocol.request('health', 1)))
            replies = closed_by_peer(sock)
        self.assertEqual(1, len(replies))
        self.assertTrue(replies[0]['ok'])
        # The slot was given back: four more clients are served, each
        # asking at once (one left waiting past idle_timeout would be
        # closed as idle, on a busy machine), all four held open.
        for _ in range(4):
            conn = self.daemon.client()
            self.addCleanup(conn.close)
            self.assertEqual('ready', conn.health()['state'])


class TestUnauthenticatedFlood(TcpDaemonTestCase):
    """Peers without the token cannot keep a client out for auth_timeout."""

    auth_timeout = 60.0

    def test_oldest_unauthenticated_peers_make_room(self):
        idle = [self.raw_tcp() for _ in range(8)]
        # The four oldest were dropped for the four newest, long before
        # auth_timeout.
        for sock in idle[:4]:
            self.assertEqual([], closed_by_peer(sock))
        with client.TaskdClient(self.tcp, token=TOKEN) as conn:
            self.assertEqual('ready', conn.health()['state'])
        with self.daemon.client() as conn:
            self.assertEqual('ready', conn.health()['state'])
