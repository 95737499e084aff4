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

"""TLS for mlaccel's own listeners: per-use identities pinned by the peer.

An :class:`Identity` is a fresh key and a self-signed certificate made for one
purpose (one VM's task daemon, one launch's readiness listener). Its peer
receives the certificate through a channel it already trusts (the VM's
user-data, the launcher's own memory) and pins it: the certificate is the
only trust anchor of the peer's client context, so no other key, not even
one signed by a public CA, is accepted. Operators who prefer their own
certificates pass files instead; the same contexts load them, and a pinned
file pins its first certificate (the server's own) and nothing of the chain
after it, so no other certificate of the operator's CA passes.
"""

import dataclasses
import datetime
import hashlib
import os
import ssl

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID

#: Lifetime of a generated identity; a launch or a pool member lives less.
DEFAULT_DAYS = 30


@dataclasses.dataclass(frozen=True)
class Identity:
    """A private key and its self-signed certificate, both PEM text."""

    cert_pem: str
    key_pem: str

    @property
    def fingerprint(self):
        """SHA-256 of the certificate's DER form, lower-case hex."""
        return fingerprint(self.cert_pem)

    def write(self, cert_file, key_file):
        """Write both files, the key readable by its owner only."""
        _write_private(key_file, self.key_pem)
        with open(cert_file, 'w') as f:
            f.write(self.cert_pem)

    def server_context(self, directory):
        """A server context for this identity; key written to ``directory``.

        ``ssl`` loads keys from files only: they go to ``directory``, which
        must be private to this process (mode 0700).
        """
        cert_file = os.path.join(directory, 'cert.pem')
        key_file = os.path.join(directory, 'key.pem')
        self.write(cert_file, key_file)
        return server_context(cert_file, key_file)


def new_identity(common_name, days=DEFAULT_DAYS):
    """A fresh P-256 key and a self-signed certificate naming it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         common_name[:64])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0),
                       critical=True)
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName('mlaccel')]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Identity(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode())


def leaf_der(cert_pem):
    """DER form of the first certificate in PEM text (a chain's leaf).

    A server presents the first certificate of its certificate file as its
    own; what follows is the chain that issued it. Raises ``ValueError``
    when the text holds no certificate.
    """
    leaf = x509.load_pem_x509_certificates(cert_pem.encode())[0]
    return leaf.public_bytes(serialization.Encoding.DER)


def fingerprint(cert_pem):
    """SHA-256 of the DER form of a PEM certificate (a chain's leaf), hex."""
    return hashlib.sha256(leaf_der(cert_pem)).hexdigest()


def server_context(cert_file, key_file):
    """A TLS 1.2+ server context from certificate and key files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def client_context(pinned_cert_pem=None, cafile=None):
    """A TLS 1.2+ client context trusting exactly what it is given.

    With ``pinned_cert_pem`` its first certificate (a chain's leaf) is the
    only trust anchor, even when a CA issued it: the peer must present that
    very certificate, and host names are not checked (the pin names the
    peer). Certificates after the first are ignored, so another certificate
    of the same CA never passes. With ``cafile`` the operator's CA bundle is
    the anchor and the peer's certificate must name the host connected to.
    """
    if bool(pinned_cert_pem) == bool(cafile):
        raise ValueError('give exactly one of a pinned certificate or a CA '
                         'file')
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if pinned_cert_pem:
        context.check_hostname = False
        context.load_verify_locations(cadata=leaf_der(pinned_cert_pem))
        # A leaf that is not self-signed is an anchor only with this flag;
        # the peer's chain then ends at the pinned certificate itself.
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    else:
        context.check_hostname = True
        context.load_verify_locations(cafile=cafile)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
