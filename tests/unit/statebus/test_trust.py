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

"""Who may speak on the state bus, tested as the attacks.

A real file or Redis bus, real publishers and a real report cache. The
attacker is any client of the bus: it picks its member id freely and may
hold the key of a compute node of its own (``cmp-evil``). Checks read
the cache as its last refresh left it (``current()``), refreshed by the
test alone, as in :mod:`tests.unit.statebus.test_replay`.
"""

import datetime
import ipaddress
import logging
import os
import socket
import stat
import subprocess
import time

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID
import fixtures

from mlaccel import hostreport
from mlaccel.statebus import keys
from mlaccel.statebus import publisher
from mlaccel.statebus import reader
from tests import fixtures as mlaccel_fixtures
from tests import testcase
from tests.unit.statebus import test_statebus

report = test_statebus.report
VICTIM = 'cmp-victim'


class TrustTests(test_statebus.BusTestBase):

    def publish_victim(self):
        """The victim's genuine, signed report, read once by a cache."""
        self.use_deployment_key()
        real = report(VICTIM, build_limit=4, cached_images=frozenset({'a'}))
        self.victim = self.signed_publisher(VICTIM)
        self.victim.publish(real)
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual(real, cache.current().get(VICTIM))
        return real, cache

    def evil_key(self):
        """The attacker's own compute's key, named as the victim's."""
        return self.host_key('cmp-evil')._replace(host=VICTIM)

    def forged(self):
        # What the issue saw: the victim looks full and slow to start.
        return report(VICTIM, builds_in_flight=1000, build_limit=1)

    def test_forged_report_under_the_victims_member_id_is_rejected(self):
        real, cache = self.publish_victim()
        evil_key = self.evil_key()
        self.join_raw(VICTIM, self.sign(evil_key, self.forged()), evict=True)
        cache.refresh()
        self.assertEqual(real, cache.current().get(VICTIM))
        self.assertIn('Rejected host report from cmp-victim: signature '
                      'does not verify with the key of host cmp-victim',
                      self.log.output)

        # The victim's next publication takes its entry back.
        again = report(VICTIM, cache_free_bytes=3)
        self.victim.publish(again)
        cache.refresh()
        self.assertEqual(again, cache.current().get(VICTIM))

    def test_unsigned_forgery_is_rejected(self):
        real, cache = self.publish_victim()
        self.join_raw(VICTIM, hostreport.encode(self.forged()), evict=True)
        cache.refresh()
        self.assertEqual(real, cache.current().get(VICTIM))
        self.assertIn('Rejected host report from cmp-victim: report is not '
                      'signed', self.log.output)

    def test_forgery_under_another_member_id_is_rejected(self):
        real, cache = self.publish_victim()
        evil_key = self.evil_key()
        self.join_raw('cmp-evil', self.sign(evil_key, self.forged()))
        cache.refresh()
        self.assertEqual({VICTIM: real}, cache.current().reports)
        self.assertIn('Rejected host report from cmp-evil: it names host '
                      'cmp-victim', self.log.output)

    def test_future_dated_report_is_rejected(self):
        # It would otherwise stay fresh for ever (timestamps up to 1e11).
        self.conf.set('mlaccel_statebus', max_clock_skew=10.0)
        far = report('cmp1', timestamp=time.time() + 1e6)
        near = report('cmp2', timestamp=time.time() + 5)
        self.bus.publisher('cmp1').publish(far)
        self.bus.publisher('cmp2').publish(near)
        cache = self.bus.cache()
        cache.refresh()
        self.assertIsNone(cache.current().get('cmp1'))
        self.assertEqual({'cmp2': near}, cache.current().reports)
        self.assertIn('Rejected host report from cmp1: it is dated',
                      self.log.output)

    def test_eviction_attempt_leaves_the_real_report(self):
        real, cache = self.publish_victim()
        held = self.held(VICTIM)
        for key in (self.evil_key(), b''):
            attacker = self.signed_publisher(VICTIM, key=key)
            self.assertRaises(publisher.HostClaimed, attacker.publish,
                              self.forged())
        self.assertEqual(held, self.held(VICTIM))
        cache.refresh()
        self.assertEqual(real, cache.current().get(VICTIM))

    def test_eviction_attempt_without_keys_leaves_the_real_report(self):
        self.conf.set('mlaccel_statebus', deployment_key_file=None,
                      allow_unsigned_reports=True)
        real = report(VICTIM)
        self.signed_publisher(VICTIM, key=b'').publish(real)
        attacker = self.signed_publisher(VICTIM, key=b'')
        self.assertRaises(publisher.HostClaimed, attacker.publish,
                          self.forged())
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual(real, cache.current().get(VICTIM))

    def test_signed_agent_reclaims_its_entry_from_an_unsigned_squatter(self):
        self.use_deployment_key()
        self.join_raw(VICTIM, hostreport.encode(self.forged()))
        real = report(VICTIM)
        self.signed_publisher(VICTIM).publish(real)
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual(real, cache.current().get(VICTIM))

    def test_unsigned_reports_are_rejected_with_a_deployment_key(self):
        self.conf.set('mlaccel_statebus', allow_unsigned_reports=True)
        self.signed_publisher('cmp1', key=b'').publish(report('cmp1'))
        cache = self.bus.cache()
        cache.refresh()
        self.assertTrue(cache.healthy)
        self.assertTrue(cache.authenticated)
        self.assertEqual({}, cache.current().reports)
        self.assertIn('Rejected host report from cmp1: report is not signed',
                      self.log.output)

    def test_publisher_signs_with_its_host_key_file(self):
        secret = self.use_deployment_key()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'k')
        keys.write_key(path, keys.derive(secret, 'cmp1').hex())
        self.conf.set('mlaccel_statebus', host_key_file=path)
        r = report('cmp1')
        self.bus.publisher('cmp1').publish(r)
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual({'cmp1': r}, cache.current().reports)

    def test_insecure_reader_accepts_all_and_says_so_once(self):
        self.conf.set('mlaccel_statebus', deployment_key_file=None,
                      allow_unsigned_reports=True)
        signed = report('cmp1')
        self.signed_publisher('cmp1').publish(signed)
        unsigned = report('cmp2')
        self.signed_publisher('cmp2', key=b'').publish(unsigned)
        cache = self.bus.cache()
        cache.refresh()
        cache.refresh()
        self.assertFalse(cache.authenticated)
        self.assertEqual({'cmp1': signed, 'cmp2': unsigned},
                         cache.current().reports)
        self.assertEqual(1, self.log.output.count(
            'INSECURE: [mlaccel_statebus] allow_unsigned_reports is set'))

    def test_rejections_of_a_member_are_logged_once_a_minute(self):
        real, cache = self.publish_victim()
        for n in range(3):
            self.join_raw(VICTIM, hostreport.encode(report(
                VICTIM, builds_in_flight=n + 100)), evict=True)
            cache.refresh()
        self.assertEqual(1, self.log.output.count('Rejected host report'))
        self.assertEqual(real, cache.current().get(VICTIM))

    def test_unreadable_deployment_key_means_no_reports(self):
        self.bus.publisher('cmp1').publish(report('cmp1'))
        self.conf.set('mlaccel_statebus', deployment_key_file=os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'missing'))
        cache = self.bus.cache()
        cache.refresh()
        cache.refresh()
        self.assertIs(False, cache.healthy)
        self.assertEqual({}, cache.current().reports)
        self.assertEqual(1, self.log.output.count(
            'Cannot check state bus report signatures'))


class TestFileTrust(TrustTests, testcase.TestCase):
    BACKEND = 'file'

    def test_bus_directory_is_created_0700(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'new', 'bus')
        self.conf.set('mlaccel_statebus', backend_url='file://' + path)
        self.bus.publisher('cmp1').publish(report('cmp1'))
        self.assertEqual(0o700, stat.S_IMODE(os.stat(path).st_mode))

    def test_reader_creates_nothing(self):
        root = self.useFixture(fixtures.TempDir()).path
        self.conf.set('mlaccel_statebus',
                      backend_url='file://%s/bus' % root)
        cache = self.bus.cache()
        cache.refresh()
        self.assertIs(True, cache.healthy)
        self.assertEqual([], os.listdir(root))

    def test_reader_of_a_path_that_is_no_directory_is_unhealthy(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'f')
        with open(path, 'w') as f:
            f.write('not a bus')
        self.conf.set('mlaccel_statebus', backend_url='file://' + path)
        cache = self.bus.cache()
        cache.refresh()
        self.assertIs(False, cache.healthy)
        self.assertIn('Not a directory', cache.last_error)


class TestEtcdTrust(TrustTests, testcase.TestCase):
    BACKEND = 'etcd'


class TestRedisTrust(TrustTests, testcase.TestCase):
    BACKEND = 'redis'

    def test_password_and_acl_user_in_the_url_are_never_shown(self):
        """AUTH and an ACL user work from the URL; neither leaks in logs."""
        import redis
        admin = redis.Redis(port=self.bus.server.port)
        self.addCleanup(admin.close)
        admin.acl_setuser('mlaccel', enabled=True, passwords=['+acl-pw-1'],
                          keys=['*'], channels=['*'], commands=['+@all'])
        admin.config_set('requirepass', 'default-pw-2')
        base = '127.0.0.1:%d?executor=synchronous' % self.bus.server.port
        for url in ('redis://mlaccel:acl-pw-1@' + base,
                    'redis://:default-pw-2@' + base):
            self.conf.set('mlaccel_statebus', backend_url=url)
            r = report('cmp1')
            pub = self.bus.publisher('cmp1')
            pub.publish(r)
            cache = self.bus.cache()
            cache.refresh()
            self.assertEqual({'cmp1': r}, cache.current().reports)
            pub.stop()

        wrong = 'redis://mlaccel:wrong-pw-3@' + base
        self.conf.set('mlaccel_statebus', backend_url=wrong)
        cache = self.bus.cache()
        cache.refresh()
        self.assertIs(False, cache.healthy)
        self.assertIn('redis://mlaccel:***@127.0.0.1', self.log.output)
        for secret in ('acl-pw-1', 'default-pw-2', 'wrong-pw-3'):
            self.assertNotIn(secret, self.log.output)
            self.assertNotIn(secret, cache.last_error)

    def test_log_opt_values_masks_the_url(self):
        self.conf.set('mlaccel_statebus',
                      backend_url='redis://:opt-pw-4@127.0.0.1:1')
        self.conf.conf.log_opt_values(reader.LOG.logger, logging.INFO)
        self.assertIn('backend_url', self.log.output)
        self.assertNotIn('opt-pw-4', self.log.output)


def _self_signed(directory):
    """A key and a self-signed certificate for 127.0.0.1; their paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, '127.0.0.1')])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                           critical=True)
            .sign(key, hashes.SHA256()))
    cert_file = os.path.join(directory, 'redis.pem')
    key_file = os.path.join(directory, 'redis.key')
    with open(cert_file, 'wb') as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_file, 'wb') as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_file, key_file


class TestRedisTls(testcase.TestCase):
    """rediss:// with a password against a real TLS-only redis-server."""

    def setUp(self):
        super().setUp()
        server = mlaccel_fixtures.RedisServer()
        server.check_installed()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.ca, key = _self_signed(tmp)
        self.port = mlaccel_fixtures.free_port()
        proc = subprocess.Popen(
            [server.binary, '--port', '0', '--tls-port', str(self.port),
             '--bind', '127.0.0.1', '--tls-cert-file', self.ca,
             '--tls-key-file', key, '--tls-ca-cert-file', self.ca,
             '--tls-auth-clients', 'no', '--requirepass', 'tls-pw-7',
             '--save', '', '--appendonly', 'no', '--dir', tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=mlaccel_fixtures._die_with_parent)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.conf.set('mlaccel_statebus', backend_url=(
            'rediss://:tls-pw-7@127.0.0.1:%d?ssl_ca_certs=%s'
            '&executor=synchronous' % (self.port, self.ca)))
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(('127.0.0.1', self.port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    self.fail('TLS redis-server did not start')
                time.sleep(0.05)

    def test_reports_travel_over_tls(self):
        r = report('cmp1')
        self.conf.set('mlaccel_statebus', allow_unsigned_reports=True)
        pub = publisher.Publisher('cmp1', self.conf.conf, host_keys=[])
        self.addCleanup(pub.stop)
        pub.publish(r)
        cache = reader.ReportCache(self.conf.conf)
        self.addCleanup(cache.stop)
        cache.refresh()
        self.assertIs(True, cache.healthy, cache.last_error)
        self.assertEqual({'cmp1': r}, cache.current().reports)
        self.assertNotIn('tls-pw-7', self.log.output)
