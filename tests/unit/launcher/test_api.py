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

No cloud here: these tests stop before the first API call (the
connection is never used), with a real readiness listener.
"""

import base64
import ssl
import time

import yaml

from mlaccel.launcher import api
from mlaccel.launcher import readiness
from mlaccel.taskd import guest
from mlaccel.taskd import protocol
from mlaccel import tls

from tests import testcase


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


class CredentialsTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.listener = readiness.ReadinessListener('127.0.0.1', 0).start()
        self.addCleanup(self.listener.stop)
        self.launch = api.Launch(None, _spec(), listener=self.listener,
                                 taskd_port=7070, preload=['json'])

    def _files(self, vm):
        text = self.launch._user_data(vm)
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
        text = self.launch._user_data(vm)
        self.assertTrue(text.startswith('#cloud-config\n'))
        base64.b64encode(text.encode())  # what servers.create sends

    def _ready(self, vm, address):
        return readiness.Readiness(key=vm.key, address=address,
                                   ready_at=time.time(),
                                   received_at=time.time(), peer='10.0.0.9')

    def test_unix_address_from_a_push_is_never_used(self):
        vm = self.launch.vms[0]
        self.launch._on_ready(self._ready(vm, 'unix:/run/mlaccel/x.sock'))
        self.assertIsNone(vm.ready)
        self.assertIn('TLS on TCP only', str(self.launch._failure))

    def test_daemon_is_reached_pinned_to_its_own_certificate(self):
        vm, other = self.launch.vms
        self.launch._on_ready(self._ready(vm, 'tcp:10.0.0.9:7070'))
        self.assertIsNone(self.launch._failure)
        client = self.launch._client(vm)
        self.assertEqual(vm.token, client.token)
        # The context trusts exactly this VM's certificate.
        ca = client._tls.get_ca_certs(binary_form=True)
        self.assertEqual(
            [tls.fingerprint(vm.identity.cert_pem)],
            [tls.fingerprint(_pem(der)) for der in ca])
        self.assertNotEqual(tls.fingerprint(other.identity.cert_pem),
                            tls.fingerprint(_pem(ca[0])))


def _pem(der):
    return ssl.DER_cert_to_PEM_cert(der)
