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

"""taskd's rekey step: a claim hands the daemon to a new token holder."""

import os
import socket
import types


from mlaccel.taskd import client
from mlaccel.taskd import protocol
from mlaccel.taskd import server
from tests import testcase
from tests.unit.taskd import base

OLD = 'old-token-0123456789'
NEW = 'new-token-9876543210'


class TestRekey(testcase.TestCase):

    def setUp(self):
        super().setUp()
        directory = self.useFixture(base.fixtures.TempDir()).path
        self.token_file = os.path.join(directory, 'token')
        with open(self.token_file, 'w') as stream:
            stream.write(OLD + '\n')
        os.chmod(self.token_file, 0o600)
        daemon = self.useFixture(base.Daemon(tcp_address='127.0.0.1:0',
                                             token_file=self.token_file))
        with daemon.client() as conn:
            self.address = conn.health()['addresses'][1]

    def _refused(self, token):
        with client.TaskdClient(self.address, token=token) as conn:
            err = self.assertRaises(client.TaskdError, conn.health)
            self.assertEqual(protocol.UNAUTHORIZED, err.code)

    def test_holder_hands_over_and_old_token_stops_working(self):
        with client.TaskdClient(self.address, token=OLD) as old:
            reply = old.rekey(NEW)
            self.assertTrue(reply['rekeyed'])
            self.assertTrue(reply['saved'])
            # The same connection goes on with the new token.
            self.assertEqual('ready', old.health()['state'])
        self._refused(OLD)
        with client.TaskdClient(self.address, token=NEW) as new:
            self.assertEqual('ready', new.health()['state'])
        with open(self.token_file) as stream:
            self.assertEqual(NEW, stream.read().strip())

    def test_an_open_connection_of_the_old_holder_is_cut_off(self):
        with client.TaskdClient(self.address, token=OLD) as kept:
            kept.health()
            with client.TaskdClient(self.address, token=OLD) as holder:
                holder.rekey(NEW)
            err = self.assertRaises(client.TaskdError, kept.health)
            self.assertEqual(protocol.UNAUTHORIZED, err.code)

    def test_without_the_token_no_rekey(self):
        self._refused('stolen-token-000000')
        with client.TaskdClient(self.address, token='wrong-token-00000') \
                as thief:
            err = self.assertRaises(client.TaskdError, thief.rekey, NEW)
            self.assertEqual(protocol.UNAUTHORIZED, err.code)
        self._refused(NEW)
        with client.TaskdClient(self.address, token=OLD) as conn:
            self.assertEqual('ready', conn.health()['state'])

    def test_bad_new_token_is_refused_and_old_one_kept(self):
        with client.TaskdClient(self.address, token=OLD) as conn:
            for bad in ('short', 'has space in it 0123', 'x' * 513):
                err = self.assertRaises(client.TaskdError, conn.call,
                                        'rekey', new_token=bad)
                self.assertEqual(protocol.INVALID, err.code)
            self.assertEqual('ready', conn.health()['state'])


class TestNoDelay(testcase.TestCase):
    """A claim's hand-over and first submit each open a TLS connection.

    After the TLS handshake the server's first reply followed its session
    tickets; with Nagle's algorithm on it waited for the client's delayed
    ACK (40 ms on Linux) on every new connection. Accepted TCP connections
    now set TCP_NODELAY.
    """

    def test_accepted_tcp_connections_send_at_once(self):
        conf = types.SimpleNamespace(max_connections=4, auth_timeout=5.0,
                                     max_request_bytes=4096,
                                     idle_timeout=5.0)
        daemon = server.Server(conf, handler=lambda request: {},
                               token='t' * 20)
        listener = socket.create_server(('127.0.0.1', 0))
        self.addCleanup(listener.close)
        peer = socket.create_connection(listener.getsockname())
        self.addCleanup(peer.close)
        conn, _ = listener.accept()
        self.addCleanup(conn.close)
        daemon._accept_tcp(conn)
        self.assertEqual(1, conn.getsockopt(socket.IPPROTO_TCP,
                                            socket.TCP_NODELAY))
