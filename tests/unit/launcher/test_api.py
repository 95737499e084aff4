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

"""What a launch gives each VM, and what it trusts a VM's push to name.

No cloud here: these tests stop before the first create call, with a
real readiness listener; the one Nova call they make, reading a server's
addresses, is answered by :class:`Nova`.
"""

import base64
import json
import os
import socket
import ssl
import threading
import time

import fixtures
import yaml

from mlaccel.launcher import api
from mlaccel.launcher import ready_listener
from mlaccel import readiness as notices
from mlaccel.taskd import guest
from mlaccel.taskd import protocol
from mlaccel.taskd import ready_push
from mlaccel import tls

from tests import testcase
from tests.unit import tls_fixtures


def _spec(count=2, **changes):
    fields = dict(image='img', flavor='f', count=count,
                  task=protocol.TaskSpec('clip', {'steps': 2}, seed=1))
    fields.update(changes)
    return api.LaunchSpec(**fields)


class LaunchSpecTest(testcase.TestCase):

    def test_request(self):
        self.assertEqual(
            {'image': 'img', 'flavor': 'f', 'count': 2, 'entry': 'clip',
             'args': {'steps': 2}, 'network': 'none', 'server_group': None,
             'timeout': 1800.0}, _spec().request())

    def test_bad_values(self):
        for changes in ({'count': 0}, {'count': True}, {'count': '2'},
                        {'timeout': 0}, {'timeout': -1.0}):
            self.assertRaises(ValueError, _spec, **changes)
        self.assertRaises(TypeError, _spec, task={'entry': 'clip'})
        self.assertRaises(ValueError, api.launch, None, 'img', 'f', 1,
                          'os system', {})


class Nova:
    """The part of a connection that reads a server's addresses.

    Every server has ``addresses`` (Nova's API form); ``reads`` counts the
    calls, which fail while ``down`` is set.
    """

    def __init__(self, addresses):
        self.compute = self
        self.addresses = addresses
        self.reads = 0
        self.down = False

    def get_server(self, server_id):
        self.reads += 1
        if self.down:
            raise ConnectionError('Nova is down')
        return type('Server', (), {'id': server_id,
                                   'addresses': self.addresses})


def fixed(*ips):
    return {'private': [{'addr': ip, 'OS-EXT-IPS:type': 'fixed'}
                        for ip in ips]}


class CredentialsTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger())
        self.listener = ready_listener.ReadinessListener(
            '127.0.0.1', 0).start()
        self.addCleanup(self.listener.stop)
        self.nova = Nova(fixed('10.0.0.9'))
        self.launch = api.Launch(self.nova, _spec(), listener=self.listener,
                                 taskd_port=7070, preload=['json'])
        for vm in self.launch.vms:
            vm.server_id = 'server-%d' % vm.index

    def _files(self, vm):
        text = self.launch.provisioner._user_data(vm)
        if isinstance(text, bytes):
            text = text.decode()
        document = yaml.safe_load(text)
        return {f['path']: f['content'] for f in document['write_files']}

    def test_each_vm_gets_its_own_token_and_identity(self):
        first, second = [self._files(vm) for vm in self.launch.vms]
        for path in (guest.TOKEN_PATH, guest.TLS_CERT_PATH,
                     guest.TLS_KEY_PATH):
            self.assertNotEqual(first[path], second[path], path)
        for files, vm in zip((first, second), self.launch.vms):
            self.assertEqual(vm.token + '\n', files[guest.TOKEN_PATH])
            self.assertEqual(vm.identity.cert_pem,
                             files[guest.TLS_CERT_PATH])
            # The launcher's certificate, which the daemon pins.
            self.assertEqual(self.listener.cert_pem,
                             files[guest.READY_CA_PATH])
            self.assertIn('ready_url = https://127.0.0.1:%d/ready/%s'
                          % (self.listener.port, vm.key),
                          files[guest.CONF_PATH])
        # One identity per VM, never the listener's.
        self.assertNotIn(self.listener.cert_pem,
                         [vm.identity.cert_pem for vm in self.launch.vms])

    def test_user_data_is_what_cloud_init_reads(self):
        vm = self.launch.vms[0]
        text = self.launch.provisioner._user_data(vm)
        self.assertTrue(text.startswith('#cloud-config\n'))
        base64.b64encode(text.encode())  # what servers.create sends

    def _ready(self, vm, address):
        return ready_listener.Readiness(key=vm.key, address=address,
                                        ready_at=time.time(),
                                        received_at=time.time(),
                                        peer='10.0.0.9')

    def test_unix_address_from_a_push_is_never_used(self):
        vm = self.launch.vms[0]
        self.launch.provisioner._on_ready(
            self._ready(vm, 'unix:/run/mlaccel/x.sock'))
        self.assertIsNone(vm.ready)
        self.assertIn('TLS on TCP only', str(self.launch.provisioner.failure))

    def test_daemon_is_reached_pinned_to_its_own_certificate(self):
        vm, other = self.launch.vms
        self.launch.provisioner._on_ready(self._ready(vm, 'tcp:10.0.0.9:7070'))
        self.assertIsNone(self.launch.provisioner.failure)
        client = self.launch.provisioner.client(vm)
        self.assertEqual(vm.token, client.token)
        # The context trusts exactly this VM's certificate.
        ca = client._tls.get_ca_certs(binary_form=True)
        self.assertEqual(
            [tls.fingerprint(vm.identity.cert_pem)],
            [tls.fingerprint(_pem(der)) for der in ca])
        self.assertNotEqual(tls.fingerprint(other.identity.cert_pem),
                            tls.fingerprint(_pem(ca[0])))

    def test_the_last_poll_spares_a_call_to_nova(self):
        vm = self.launch.vms[0]
        vm.addresses = ready_listener.server_addresses(fixed('10.0.0.9'))
        self.nova.down = True
        self.launch.provisioner._on_ready(self._ready(vm, 'tcp:10.0.0.9:7070'))
        self.assertEqual('tcp:10.0.0.9:7070', vm.ready.address)
        self.assertEqual(0, self.nova.reads)

    def test_nova_is_asked_when_the_last_poll_did_not_list_it(self):
        # A push may arrive before the poll saw the server's addresses.
        vm = self.launch.vms[0]
        vm.addresses = ()
        self.launch.provisioner._on_ready(self._ready(vm, 'tcp:10.0.0.9:7070'))
        self.assertEqual('tcp:10.0.0.9:7070', vm.ready.address)
        self.assertEqual(1, self.nova.reads)

    def test_no_address_to_reach_fails_the_launch(self):
        vm = self.launch.vms[0]
        self.nova.down = True
        self.launch.provisioner._on_ready(self._ready(vm, 'tcp:10.0.0.9:7070'))
        self.assertIsNone(vm.ready)
        self.assertIn('Nova lists no address for server server-0',
                      str(self.launch.provisioner.failure))


def _pem(der):
    return ssl.DER_cert_to_PEM_cert(der)


class SteeringTest(testcase.TestCase):
    """A guest's push names another host: the launcher never goes there.

    Real sockets and TLS: the VM's daemon serves at the address Nova lists
    for its server (here 127.0.0.1), a trap of the guest's choosing listens
    on another host (127.0.0.3) on the same port, and the guest pushes its
    readiness, signed with its own token, naming the trap.
    """

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger())
        self.listener = ready_listener.ReadinessListener(
            '127.0.0.1', 0).start()
        self.addCleanup(self.listener.stop)
        self.nova = Nova(fixed('127.0.0.1'))
        self.launch = api.Launch(self.nova, _spec(1), listener=self.listener)
        self.vm = self.launch.vms[0]
        self.vm.server_id = 'server-0'
        self.listener.expect(self.vm.key, self.launch.provisioner._on_ready,
                             self.vm.token)
        self.daemon = self.useFixture(tls_fixtures.TLSServer(
            self.vm.identity, serve=self._answer))
        self.trap = socket.create_server(('127.0.0.3', self.daemon.port))
        self.addCleanup(self.trap.close)
        self.trapped = []
        threading.Thread(target=self._catch, daemon=True).start()

    @staticmethod
    def _answer(conn):
        """A task daemon's health reply to each request."""
        for line in protocol.iter_lines(conn.recv, 65536):
            conn.sendall(protocol.encode(protocol.ok(
                json.loads(line)['id'], state='ready')))

    def _catch(self):
        while True:
            try:
                conn, peer = self.trap.accept()
            except OSError:
                return
            self.trapped.append(peer)
            conn.close()

    def _push(self, address):
        cafile = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'ready.pem')
        with open(cafile, 'w') as stream:
            stream.write(self.listener.cert_pem)
        url = self.listener.url_for(self.vm.key)
        self.assertTrue(ready_push.push(
            url, notices.notice(url, address, time.time(), [], 1),
            token=self.vm.token, cafile=cafile, attempts=1))

    def test_push_naming_another_host_reaches_the_vm_only(self):
        self._push('tcp:127.0.0.3:%d' % self.daemon.port)
        self.assertIsNone(self.launch.provisioner.failure)
        address = 'tcp:127.0.0.1:%d' % self.daemon.port
        self.assertEqual(address, self.vm.ready.address)
        self.assertIn('which Nova does not list for server server-0; '
                      'reaching it at %s instead' % address,
                      self.logs.output)
        with self.launch.provisioner.client(self.vm, timeout=5) as client:
            self.assertEqual('ready', client.health()['state'])
        self.assertEqual([], self.trapped)

    def test_server_without_addresses_is_reached_where_it_pushed_from(self):
        # The test cloud: no network, the guest is a process of this host.
        self.nova.addresses = {}
        self._push('tcp:0.0.0.0:%d' % self.daemon.port)
        self.assertEqual('tcp:127.0.0.1:%d' % self.daemon.port,
                         self.vm.ready.address)
        with self.launch.provisioner.client(self.vm, timeout=5) as client:
            self.assertEqual('ready', client.health()['state'])
