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

"""Client contexts of mlaccel.tls in real handshakes on loopback sockets."""

import os
import socket
import ssl

import fixtures

from mlaccel import tls

from tests import testcase
from tests.unit import tls_fixtures


def handshake(context, port, server_hostname='127.0.0.1'):
    """Connect with ``context``; return what the server sent."""
    with socket.create_connection(('127.0.0.1', port), timeout=5) as sock:
        with context.wrap_socket(sock,
                                 server_hostname=server_hostname) as conn:
            return conn.recv(2)


class TLSTestCase(testcase.TestCase):

    def _server(self, identity):
        """The port of a TLS server of ``identity``."""
        return self.useFixture(tls_fixtures.TLSServer(identity)).port


class PinnedTest(TLSTestCase):

    def test_self_signed_identity_is_pinned(self):
        identity = tls.new_identity('vm-0')
        context = tls.client_context(pinned_cert_pem=identity.cert_pem)
        self.assertEqual(b'ok', handshake(context, self._server(identity),
                                          'any'))
        self.assertRaises(ssl.SSLCertVerificationError, handshake, context,
                          self._server(tls.new_identity('vm-0')))

    def test_operator_certificate_pins_its_leaf_not_its_ca(self):
        # The launcher's certificate, issued by the operator's CA, with the
        # chain after it: a guest gets the whole file and pins it. Another
        # certificate from the same CA (another service's, or one the CA
        # issued to anyone) must not pass as the launcher.
        ca = tls_fixtures.OperatorCA()
        launcher = ca.issue('launcher')
        context = tls.client_context(pinned_cert_pem=launcher.cert_pem)
        self.assertEqual(b'ok', handshake(context, self._server(launcher)))
        error = self.assertRaises(ssl.SSLCertVerificationError, handshake,
                                  context, self._server(ca.issue('impostor')))
        self.assertIn('certificate verify failed', str(error))
        self.assertEqual(1, context.cert_store_stats()['x509'])

    def test_fingerprint_is_the_leafs(self):
        ca = tls_fixtures.OperatorCA()
        launcher = ca.issue('launcher')
        leaf = launcher.cert_pem[:-len(ca.cert_pem)]
        self.assertEqual(tls.fingerprint(leaf), launcher.fingerprint)
        self.assertNotEqual(tls.fingerprint(ca.cert_pem),
                            launcher.fingerprint)
        self.assertRaises(ValueError, tls.fingerprint, 'no certificate')


class CAFileTest(TLSTestCase):

    def test_the_peer_must_be_named(self):
        ca = tls_fixtures.OperatorCA()
        cafile = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'ca.pem')
        with open(cafile, 'w') as stream:
            stream.write(ca.cert_pem)
        context = tls.client_context(cafile=cafile)
        self.assertTrue(context.check_hostname)
        self.assertEqual(b'ok', handshake(
            context, self._server(ca.issue('vm', ip='127.0.0.1'))))
        error = self.assertRaises(
            ssl.SSLCertVerificationError, handshake, context,
            self._server(ca.issue('vm', ip='127.0.0.2')))
        self.assertIn('IP address mismatch', str(error))

    def test_exactly_one_anchor(self):
        self.assertRaises(ValueError, tls.client_context)
        self.assertRaises(ValueError, tls.client_context,
                          pinned_cert_pem='x', cafile='y')
