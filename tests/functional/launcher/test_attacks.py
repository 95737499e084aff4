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

"""A launch under attack from a third party and from a sibling guest.

The attacker knows every VM's readiness URL and the launcher's certificate
(both are in every guest's user-data) and runs a forged task daemon on the
launcher's host, over a Unix socket and TCP, that answers every request
with a forged success. Before each real daemon starts, the attacker pushes
a readiness notice for that VM naming the forged daemon: unsigned, and
signed with another VM's token (a process in a sibling guest holds that
one). The launch must ignore every forged push, send nothing to the forged
daemon (least of all a token) and record the real daemons' results.

A guest can also push for its own VM, with its own token, naming another
host: the launcher must connect to none but the addresses Nova lists for
the server.
"""

import base64
import configparser
import json
import os
import socket
import ssl
import threading
import time

import fixtures
import yaml

from mlaccel import readiness as notices
from mlaccel.taskd import client
from mlaccel.taskd import guest as taskd_guest
from mlaccel.taskd import protocol
from mlaccel.taskd import ready_push
from tests.functional.launcher import base
from tests.functional.launcher import guest


class ForgedDaemon:
    """A fake taskd that records every line it gets and says yes to all."""

    def __init__(self, root, host='127.0.0.1'):
        self.lines = []
        self.unix_path = os.path.join(root, 'forged.sock')
        self.sockets = [socket.socket(socket.AF_UNIX),
                        socket.socket(socket.AF_INET)]
        self.sockets[0].bind(self.unix_path)
        self.sockets[1].bind((host, 0))
        self.tcp_address = 'tcp:%s:%d' % (
            host, self.sockets[1].getsockname()[1])
        for sock in self.sockets:
            sock.listen(16)
            threading.Thread(target=self._accept, args=(sock,),
                             daemon=True).start()

    def _accept(self, sock):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn):
        task = {'id': 'f' * 32, 'state': 'succeeded',
                'result': {'forged': True}, 'started_at': time.time(),
                'first_step_at': time.time(), 'finished_at': time.time()}
        with conn:
            for line in protocol.iter_lines(conn.recv, 1 << 20):
                self.lines.append(line)
                try:
                    rid = json.loads(line).get('id')
                except ValueError:
                    rid = None
                conn.sendall(protocol.encode(protocol.ok(
                    rid, task=task, timed_out=False)))

    def close(self):
        for sock in self.sockets:
            sock.close()


def _guest_files(user_data):
    text = base64.b64decode(user_data).decode()
    return {f['path']: f['content']
            for f in yaml.safe_load(text)['write_files']}


class AttackTest(base.LauncherTestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.forged = ForgedDaemon(root)
        self.addCleanup(self.forged.close)
        self.cafile = os.path.join(root, 'launcher.pem')
        self.tokens = []
        self.credentials = {}
        self.refused = []
        real_boot = guest.boot

        def boot(instance_uuid, user_data):
            self._attack(_guest_files(user_data))
            return real_boot(instance_uuid, user_data)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.boot', boot))

    def _attack(self, files):
        conf = configparser.ConfigParser(interpolation=None)
        conf.read_string(files[taskd_guest.CONF_PATH])
        url = conf['mlaccel_taskd']['ready_url']
        with open(self.cafile, 'w') as stream:
            stream.write(files[taskd_guest.READY_CA_PATH])
        tokens = [None] + self.tokens[-1:]  # unsigned; a sibling's token
        self.tokens.append(files[taskd_guest.TOKEN_PATH].strip())
        self.credentials[url] = (self.tokens[-1],
                                 files[taskd_guest.TLS_CERT_PATH])
        for token in tokens:
            for address in ('unix:' + self.forged.unix_path,
                            self.forged.tcp_address):
                body = notices.notice(url, address, time.time(), [], 1)
                self.refused.append(not ready_push.push(
                    url, body, token=token, cafile=self.cafile, attempts=1))

    def test_forged_pushes_are_refused_and_reach_nothing(self):
        result = self._launch(2)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        # Two VMs: 2 unsigned pushes each, 2 signed by the sibling's token.
        self.assertEqual([True] * 6, self.refused)
        self.assertEqual([], self.forged.lines)
        for vm in result['vms']:
            self.assertEqual({'x': 1}, vm['result']['args'])
            self.assertNotIn('forged', vm['result'])
            self.assertNotIn(self.forged.tcp_address, vm['address'])
        # The record, which users share, holds no VM's secret.
        text = json.dumps(result)
        for token in self.tokens:
            self.assertNotIn(token, text)
        self.assertNotIn('PRIVATE KEY', text)
        self._assert_nothing_left()

    def test_a_siblings_credentials_open_nothing(self):
        result = self._launch(2, keep_servers=True)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.addCleanup(self._delete_kept, result)
        own = {notices.key_of(url): creds
               for url, creds in self.credentials.items()}
        (a, b) = result['vms']
        token_a, cert_a = own[a['ready']['key']]
        token_b, cert_b = own[b['ready']['key']]
        self.assertNotEqual(token_a, token_b)
        # VM a's token on VM b's daemon (reached the way the launcher does).
        with client.TaskdClient(b['address'], token=token_a,
                                pinned_cert_pem=cert_b) as conn:
            error = self.assertRaises(client.TaskdError, conn.health)
            self.assertEqual(protocol.UNAUTHORIZED, error.code)
        # VM a's daemon cannot pass for VM b's: the pin refuses it.
        with client.TaskdClient(a['address'], token=token_b,
                                pinned_cert_pem=cert_b) as conn:
            self.assertRaises(ssl.SSLError, conn.health)
        with client.TaskdClient(b['address'], token=token_b,
                                pinned_cert_pem=cert_b) as conn:
            self.assertEqual('ready', conn.health()['state'])

    def _delete_kept(self, result):
        for vm in result['vms']:
            self.conn.compute.delete_server(vm['server_id'])
        self._wait_until(lambda: not [
            s for s in self.conn.compute.servers() if s.status != 'DELETED'],
            'the kept servers to be deleted')


class SteeringTest(base.LauncherTestCase):
    """Nova lists 127.0.0.1 for the server, where its daemon serves.

    Before the daemon starts, the guest pushes its readiness, signed with
    its own token, naming a daemon of its own on another host (127.0.0.2).
    """

    def setUp(self):
        super().setUp()
        port = self.neutron._ports[self.neutron.port_1['id']]
        port['fixed_ips'] = [{'ip_address': '127.0.0.1',
                              'subnet_id': self.neutron.subnet_1['id']}]
        self.network = [{'port': port['id']}]
        self.forged = ForgedDaemon(self.useFixture(fixtures.TempDir()).path,
                                   host='127.0.0.2')
        self.addCleanup(self.forged.close)
        self.logs = self.useFixture(fixtures.FakeLogger())

    def test_the_address_nova_lists_is_reached(self):
        result = self._launch(1, network=self.network)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertTrue(result['vms'][0]['address'].startswith(
            'tcp:127.0.0.1:'))
        self._assert_nothing_left()

    def test_a_pushed_host_nova_does_not_list_is_never_reached(self):
        root = self.useFixture(fixtures.TempDir()).path
        real_boot = guest.boot

        def boot(instance_uuid, user_data):
            files = _guest_files(user_data)
            conf = configparser.ConfigParser(interpolation=None)
            conf.read_string(files[taskd_guest.CONF_PATH])
            url = conf['mlaccel_taskd']['ready_url']
            cafile = os.path.join(root, 'launcher.pem')
            with open(cafile, 'w') as stream:
                stream.write(files[taskd_guest.READY_CA_PATH])
            self.assertTrue(ready_push.push(
                url, notices.notice(url, self.forged.tcp_address,
                                    time.time(), [], 1),
                token=files[taskd_guest.TOKEN_PATH].strip(), cafile=cafile,
                attempts=1))
            return real_boot(instance_uuid, user_data)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.boot', boot))
        result = self._launch(1, network=self.network)
        # The guest may spoil its own launch, and nothing more.
        self.assertEqual('failed', result['outcome'])
        self.assertEqual([], self.forged.lines)
        self.assertIn('which Nova does not list for server %s; reaching it '
                      'at tcp:127.0.0.1:' % result['vms'][0]['server_id'],
                      self.logs.output)
        self.assertNotIn('127.0.0.2', result['vms'][0]['address'])
        self._assert_nothing_left()
