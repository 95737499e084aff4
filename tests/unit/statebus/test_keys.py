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
        [key] = keys.read_deployment_keys(path)
        self.assertEqual((64, keys.key_id(key.secret)),
                         (len(key.secret), key.id))
        self.assertRaises(keys.KeyFileError, keys.write_key, path, 'x' * 64)

    def test_key_files_hold_ids_and_several_keys(self):
        dk = os.path.join(self.tmp, 'dk')
        keys.write_key(dk, '# rotated\nnew %s\n\n%s\n' % ('n' * 32, 'o' * 32))
        self.assertEqual(
            [keys.DeploymentKey('new', b'n' * 32),
             keys.DeploymentKey(keys.key_id(b'o' * 32), b'o' * 32)],
            keys.read_deployment_keys(dk))
        hk = os.path.join(self.tmp, 'hk')
        keys.write_key(hk, 'k1 node@a %s\n%s' % ('ab' * 32, 'cd' * 32))
        self.assertEqual(
            [keys.HostKey('k1', 'node@a', b'\xab' * 32),
             keys.HostKey(keys.UNNAMED, None, b'\xcd' * 32)],
            keys.read_host_keys(hk))
        for name, text in [('twice', 'a %s\na %s' % ('x' * 32, 'y' * 32)),
                           ('badid', 'a/b %s' % ('x' * 32))]:
            path = os.path.join(self.tmp, name)
            keys.write_key(path, text)
            self.assertRaises(keys.KeyFileError, keys.read_deployment_keys,
                              path)

    def test_rotate_keeps_the_previous_key_only(self):
        dk = os.path.join(self.tmp, 'dk')
        keys.write_key(dk, keys.generate())
        first = keys.read_deployment_keys(dk)
        second, dropped = keys.rotate(dk)
        self.assertEqual([], dropped)
        third, dropped = keys.rotate(dk)
        self.assertEqual([first[0].id], dropped)
        self.assertEqual([third, second],
                         [k.id for k in keys.read_deployment_keys(dk)])
        self.assertEqual(0o600, stat.S_IMODE(os.stat(dk).st_mode))

    def test_unsafe_or_malformed_key_files_are_refused(self):
        path = os.path.join(self.tmp, 'k')
        keys.write_key(path, 'ab' * 32)
        keys.read_host_keys(path)
        os.chmod(path, 0o604)
        self.assertIn('accessible to other users', str(self.assertRaises(
            keys.KeyFileError, keys.read_host_keys, path)))
        os.chmod(path, 0o640)
        keys.read_host_keys(path)  # group-readable, e.g. root:nova 0640
        short = os.path.join(self.tmp, 'short')
        keys.write_key(short, 'abc')
        self.assertRaises(keys.KeyFileError, keys.read_host_keys, short)
        self.assertRaises(keys.KeyFileError, keys.read_deployment_keys,
                          short)
        self.assertRaises(keys.KeyFileError, keys.read_host_keys,
                          os.path.join(self.tmp, 'missing'))

    def test_provision_keeps_the_secret_and_fixes_host_keys(self):
        dk = os.path.join(self.tmp, 'dk')
        hosts = {os.path.join(self.tmp, h): [h] for h in ('cmp1', 'cmp2')}
        keys.provision(dk, hosts)
        deployment = keys.read_deployment_keys(dk)
        with open(os.path.join(self.tmp, 'cmp2'), 'w') as f:
            f.write('00' * 32)
        keys.provision(dk, hosts)
        self.assertEqual(deployment, keys.read_deployment_keys(dk))
        for path, names in hosts.items():
            self.assertEqual(keys.derive_all(deployment, names),
                             keys.read_host_keys(path))
            self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))


class SigningTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.deployment = [keys.DeploymentKey('k1', b'd' * 32)]
        self.key = keys.derive_all(self.deployment, ['cmp1'])[0]

    def test_signed_report_verifies_only_for_its_host_and_group(self):
        raw = signing.sign(self.key, b'g', 7, b'{"a":1}')
        verifier = signing.Verifier(self.deployment, b'g')
        self.assertEqual((2, 'k1', 7, b'{"a":1}'),
                         verifier.check(raw, 'cmp1')[:3] + (
                             verifier.check(raw, 'cmp1').body,))
        self.assertRaises(signing.BadSignature, verifier.check, raw, 'cmp2')
        self.assertRaises(signing.BadSignature,
                          signing.Verifier(self.deployment, b'other').check,
                          raw, 'cmp1')
        for tampered in (raw.replace(b'"a":1', b'"a":2'),
                         raw.replace(b' 7 ', b' 8 '),
                         raw.replace(b'k1', b'k2')):
            self.assertRaises(signing.BadSignature, verifier.check,
                              tampered, 'cmp1')
        for bad in (b'{"a":1}', signing.PREFIX + b'xx\n{}',
                    signing.PREFIX + b'k1 01 ' + b'0' * 64 + b'\n{}',
                    signing.PREFIX_V1 + b'xx\n{}'):
            self.assertRaises(signing.BadSignature, verifier.check, bad,
                              'cmp1')

    def test_reports_signed_before_sequence_numbers_still_verify(self):
        raw = signing.sign_v1(self.key.key, b'g', b'{}')
        signed = signing.Verifier(self.deployment, b'g').check(raw, 'cmp1')
        self.assertEqual((1, None, b'{}'),
                         (signed.version, signed.sequence, signed.body))

    def test_without_keys_everything_passes_unverified(self):
        verifier = signing.Verifier(None, b'g')
        self.assertFalse(verifier.authenticated)
        raw = signing.sign(self.key._replace(key=b'k' * 32), b'g', 1, b'{}')
        self.assertEqual(b'{}', verifier.check(raw, 'cmp1').body)
        self.assertEqual(b'{}', verifier.check(b'{}', 'cmp1').body)


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

    def test_defaults_are_added_unless_the_url_sets_them(self):
        self.assertEqual('etcd3+http://h:2379?api_version=v3&lock_timeout=10',
                         bus_url.with_defaults(
                             'etcd3+http://h:2379?api_version=v3',
                             lock_timeout=10))
        self.assertEqual('redis://h?lock_timeout=60',
                         bus_url.with_defaults('redis://h?lock_timeout=60',
                                               lock_timeout=10))
        self.assertEqual('file:///var/bus?lock_timeout=10',
                         bus_url.with_defaults('file:///var/bus',
                                               lock_timeout=10))

    def test_unknown_scheme_is_named_without_secrets(self):
        exc = self.assertRaises(bus_url.BackendError, bus_url.tooz_url,
                                'nosuch://u:pw4@h')
        self.assertIn("unknown backend 'nosuch'", str(exc))
        self.assertNotIn('pw4', str(exc))
