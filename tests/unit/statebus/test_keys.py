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

"""Report keys, signatures and the masking of the bus URL."""

import hashlib
import hmac
import os
import stat

import fixtures

from mlaccel.statebus import keys
from mlaccel.statebus import signing
from mlaccel.statebus import url as bus_url

from tests import testcase


class KeysTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_host_key_is_the_documented_hmac(self):
        secret = b's' * 40
        self.assertEqual(
            hmac.new(secret, b'mlaccel-host:cmp1', hashlib.sha256).digest(),
            keys.derive(secret, 'cmp1'))
        self.assertNotEqual(keys.derive(secret, 'cmp1'),
                            keys.derive(secret, 'cmp2'))

    def test_written_keys_are_private_and_read_back(self):
        path = os.path.join(self.tmp, 'dk')
        keys.write_key(path, keys.generate())
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual(64, len(keys.read_deployment_key(path)))
        self.assertRaises(keys.KeyFileError, keys.write_key, path, 'x' * 64)

    def test_unsafe_or_malformed_key_files_are_refused(self):
        path = os.path.join(self.tmp, 'k')
        keys.write_key(path, 'ab' * 32)
        keys.read_host_key(path)
        os.chmod(path, 0o604)
        self.assertIn('accessible to other users', str(self.assertRaises(
            keys.KeyFileError, keys.read_host_key, path)))
        os.chmod(path, 0o640)
        keys.read_host_key(path)  # group-readable, e.g. root:nova 0640
        short = os.path.join(self.tmp, 'short')
        keys.write_key(short, 'abc')
        self.assertRaises(keys.KeyFileError, keys.read_host_key, short)
        self.assertRaises(keys.KeyFileError, keys.read_deployment_key, short)
        self.assertRaises(keys.KeyFileError, keys.read_host_key,
                          os.path.join(self.tmp, 'missing'))

    def test_provision_keeps_the_secret_and_fixes_host_keys(self):
        dk = os.path.join(self.tmp, 'dk')
        hosts = {h: os.path.join(self.tmp, h) for h in ('cmp1', 'cmp2')}
        keys.provision(dk, hosts)
        secret = keys.read_deployment_key(dk)
        with open(hosts['cmp2'], 'w') as f:
            f.write('00' * 32)
        keys.provision(dk, hosts)
        self.assertEqual(secret, keys.read_deployment_key(dk))
        for host, path in hosts.items():
            self.assertEqual(keys.derive(secret, host),
                             keys.read_host_key(path))
            self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))


class SigningTest(testcase.TestCase):

    def test_signed_report_verifies_only_for_its_host_and_group(self):
        secret = b'd' * 32
        raw = signing.sign(keys.derive(secret, 'cmp1'), b'g', b'{"a":1}')
        verifier = signing.Verifier(secret, b'g')
        self.assertEqual(b'{"a":1}', verifier.body(raw, 'cmp1'))
        self.assertRaises(signing.BadSignature, verifier.body, raw, 'cmp2')
        self.assertRaises(signing.BadSignature,
                          signing.Verifier(secret, b'other').body, raw,
                          'cmp1')
        tampered = raw.replace(b'"a":1', b'"a":2')
        self.assertRaises(signing.BadSignature, verifier.body, tampered,
                          'cmp1')
        self.assertRaises(signing.BadSignature, verifier.body,
                          b'{"a":1}', 'cmp1')
        self.assertRaises(signing.BadSignature, verifier.body,
                          signing.PREFIX + b'xx\n{}', 'cmp1')

    def test_without_a_secret_everything_passes_unverified(self):
        verifier = signing.Verifier(None, b'g')
        self.assertFalse(verifier.authenticated)
        raw = signing.sign(b'k' * 32, b'g', b'{}')
        self.assertEqual(b'{}', verifier.body(raw, 'cmp1'))
        self.assertEqual(b'{}', verifier.body(b'{}', 'cmp1'))


class UrlTest(testcase.TestCase):

    def test_secrets_are_masked(self):
        for url, shown, hidden in [
                ('redis://:pw1@h:6379', 'redis://:***@h:6379', 'pw1'),
                ('redis://user:p%40ss@h:1/?db=0', 'redis://user:***@h:1/?db=0',
                 'p%40ss'),
                ('redis://h:1?sentinel=m&sentinel_password=pw2&ssl=true',
                 'redis://h:1?sentinel=m&sentinel_password=***&ssl=true',
                 'pw2'),
                ('redis://:pw3@h:bad', 'redis://***@h:bad', 'pw3'),
                ('file:///var/lib/bus?timeout=3', 'file:///var/lib/bus'
                 '?timeout=3', None)]:
            self.assertEqual(shown, bus_url.mask(url))
            if hidden:
                text = bus_url.redact('error at %s: %s and %s' % (
                    url, hidden, bus_url.secrets(url)[-1]), url)
                self.assertNotIn(hidden, text)
        self.assertNotIn('p@ss', bus_url.redact(
            'AUTH p@ss failed', 'redis://user:p%40ss@h:1'))

    def test_rediss_becomes_redis_with_tls(self):
        self.assertEqual('redis://:pw@h:6380?ssl_ca_certs=/ca&ssl=true',
                         bus_url.tooz_url('rediss://:pw@h:6380?'
                                          'ssl_ca_certs=/ca'))
        self.assertEqual('redis://h', bus_url.tooz_url('redis://h'))

    def test_unknown_scheme_is_named_without_secrets(self):
        exc = self.assertRaises(bus_url.BackendError, bus_url.tooz_url,
                                'nosuch://u:pw4@h')
        self.assertIn("unknown backend 'nosuch'", str(exc))
        self.assertNotIn('pw4', str(exc))
