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

"""TLS for the tests: an operator's CA and a server on a loopback socket.

- :class:`OperatorCA`: a root CA issuing server certificates.
- :class:`TLSServer`: a real TLS server of an identity on loopback.
"""

import datetime
import ipaddress
import os
import socket
import ssl
import threading

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID
import fixtures

from mlaccel import tls


def _name(text):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM).decode()


class OperatorCA:
    """A self-signed root CA issuing certificates for IP addresses."""

    def __init__(self, name='Operator Root CA'):
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                           critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.cert_pem = _pem(self._cert)

    def issue(self, common_name, ip='127.0.0.1'):
        """A server identity whose certificate, then this CA's, is its PEM.

        The certificate names ``ip`` in its subjectAltName.
        """
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                           critical=True)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
            .sign(self._key, hashes.SHA256()))
        return tls.Identity(
            cert_pem=_pem(cert) + self.cert_pem,
            key_pem=key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()).decode())

    def write(self, directory, identity, name):
        """Write ``identity``'s files as ``name``; return their paths."""
        paths = (os.path.join(directory, name + '.pem'),
                 os.path.join(directory, name + '.key'))
        identity.write(*paths)
        return paths


def say_ok(conn):
    conn.sendall(b'ok')


class TLSServer(fixtures.Fixture):
    """A TLS server of ``identity`` on ``host``: ``serve(conn)`` per client.

    ``serve`` gets each connection after its handshake; by default it sends
    ``b'ok'``. Failed handshakes are ignored.
    """

    def __init__(self, identity, serve=say_ok, host='127.0.0.1'):
        super().__init__()
        self.identity = identity
        self.serve = serve
        self.host = host

    def _setUp(self):
        private = self.useFixture(fixtures.TempDir()).path
        os.chmod(private, 0o700)
        self.context = self.identity.server_context(private)
        self.sock = socket.create_server((self.host, 0))
        self.addCleanup(self.sock.close)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,),
                             daemon=True).start()

    def _handle(self, conn):
        conn.settimeout(5)
        try:
            with self.context.wrap_socket(conn, server_side=True) as tls:
                self.serve(tls)
        except (OSError, ssl.SSLError):
            conn.close()
