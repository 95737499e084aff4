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

"""The state bus end to end.

Real publishers, a real report cache, and a real file or Redis backend (a
``redis-server`` started for the tests).
"""

import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import time

import fixtures
from tooz import coordination

from mlaccel import hostreport
from mlaccel import statebus
from mlaccel.statebus import drivers
from mlaccel.statebus import keys
from mlaccel.statebus import publisher
from mlaccel.statebus import signing
from tests import fixtures as mlaccel_fixtures
from tests import testcase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def report(host, **fields):
    fields.setdefault('timestamp', time.time())
    return hostreport.HostReport(host, **fields)


class BusTestBase:
    """A bus of kind :attr:`BACKEND`, an isolated config and the log."""

    BACKEND = None

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.conf.set('mlaccel_statebus', refresh_interval=0.1,
                      report_max_age=30.0)
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(
            self.conf.conf, self.BACKEND))
        self.log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))

    def join_raw(self, member, raw, evict=False, announce=True):
        """Join as ``member`` with ``raw`` capabilities, like a bad client.

        :param evict: first remove whoever holds ``member``, as any client
            of the bus can.
        :param announce: announce the write to readers, as a publisher
            does (a bad client can, so readers do see what it wrote).
        """
        coord = statebus.coordinator(self.conf.conf, member)
        coord.start()
        self.addCleanup(coord.stop)
        group = statebus.group_id(self.conf.conf)
        try:
            coord.create_group(group).get()
        except Exception:
            pass  # already there
        if evict:
            try:
                coord.leave_group(group).get()
            except coordination.MemberNotJoined:
                pass
        coord.join_group(group, raw).get()
        if announce:
            drivers.for_client(coord, group).announce(member.encode())
        return coord

    def held(self, member):
        """The raw report the bus holds for ``member``."""
        coord = statebus.coordinator(self.conf.conf, 'inspector')
        coord.start(start_heart=False)
        self.addCleanup(coord.stop)
        return coord.get_member_capabilities(
            statebus.group_id(self.conf.conf), member.encode()).get()

    def use_deployment_key(self):
        """The readers' (current) deployment key; also ``self.secret``."""
        self.deployment_key = self.bus.deployment_keys[0]
        self.secret = self.deployment_key.secret
        return self.secret

    def host_key(self, host, deployment_key=None):
        """``host``'s :class:`~mlaccel.statebus.keys.HostKey`."""
        k = deployment_key or self.bus.deployment_keys[0]
        return keys.HostKey(k.id, host, keys.derive(k.secret, host))

    def sign(self, key, report, sequence=1):
        """``report`` encoded and signed with ``key``, numbered so."""
        return signing.sign(key, statebus.group_id(self.conf.conf),
                            sequence, hostreport.encode(report))

    def wait_until(self, cache, predicate, timeout=120):
        """Let ``cache`` refresh until ``predicate()`` holds or time is up."""
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0 or not cache.wait_for_refresh(1, timeout=left):
                return predicate()
        return True

    def signed_publisher(self, host, key=None):
        """A started publisher signing with ``key`` (default: its own).

        ``key`` is a :class:`~mlaccel.statebus.keys.HostKey`, or ``b''``:
        unsigned.
        """
        if key is None:
            key = self.host_key(host)
        pub = publisher.Publisher(host, self.conf.conf,
                                  host_keys=[key] if key else [])
        self.addCleanup(pub.stop)
        pub.start()
        return pub


class BusTests(BusTestBase):
    """Run against :attr:`BACKEND`; subclasses say how to break the bus."""

    def test_empty_bus_is_healthy_and_has_no_reports(self):
        cache = self.bus.cache()
        cache.refresh()
        self.assertTrue(cache.healthy)
        self.assertEqual(0, len(cache.snapshot()))
        self.assertIsNone(cache.snapshot().get('cmp1'))

    def test_publish_then_read(self):
        reports = [report('cmp%d' % i, cached_images=frozenset({'img-a'}),
                          builds_in_flight=i, build_limit=4)
                   for i in range(3)]
        for r in reports:
            self.bus.publisher(r.host).publish(r)
        cache = self.bus.cache()
        cache.refresh()
        snapshot = cache.snapshot()
        self.assertTrue(cache.healthy)
        self.assertEqual(3, len(snapshot))
        for r in reports:
            self.assertEqual(r, snapshot.get(r.host))
        self.assertIsNone(snapshot.get('cmp-unknown'))

    def test_update_replaces_the_report(self):
        pub = self.bus.publisher('cmp1')
        cache = self.bus.cache()
        for n in range(3):
            r = report('cmp1', builds_in_flight=n,
                       cached_images=frozenset({'img-%d' % n}))
            pub.publish(r)
            cache.refresh()
            self.assertEqual(r, cache.snapshot().get('cmp1'))
            self.assertEqual(1, len(cache.snapshot()))

    def test_unchanged_reports_are_not_decoded_again(self):
        self.bus.publisher('cmp1').publish(report('cmp1'))
        cache = self.bus.cache()
        cache.refresh()
        first = cache.snapshot().get('cmp1')
        cache.refresh()
        self.assertIs(first, cache.snapshot().get('cmp1'))

    def test_publisher_refuses_another_hosts_report(self):
        pub = self.bus.publisher('cmp1')
        self.assertRaises(ValueError, pub.publish, report('cmp2'))

    def test_restarted_agent_replaces_its_predecessor(self):
        # A crashed agent's member stays on the bus, still heartbeating
        # for a while; its successor proves with the host's key that the
        # entry is its own and takes it over at once.
        key = self.host_key('cmp1')
        self.join_raw('cmp1', self.sign(key, report('cmp1')))
        new = report('cmp1', cache_free_bytes=2)
        self.signed_publisher('cmp1', key).publish(new)
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual(new, cache.snapshot().get('cmp1'))

    def test_unsigned_agent_replaces_a_predecessor_that_went_stale(self):
        # Without keys there is no proof of ownership: the entry is taken
        # over once its report is too old to be used anyway.
        # Nor can a report dated in the future hold the entry for ever.
        for stamp in (time.time() - 31, time.time() + 3600):
            self.join_raw('cmp1', hostreport.encode(report(
                'cmp1', timestamp=stamp)), evict=True)
            new = report('cmp1', cache_free_bytes=2)
            pub = self.bus.publisher('cmp1')
            pub.publish(new)
            cache = self.bus.cache()
            cache.refresh()
            self.assertEqual(new, cache.snapshot().get('cmp1'))
            pub.stop()

    def test_stopped_publisher_leaves(self):
        pub = self.bus.publisher('cmp1')
        pub.publish(report('cmp1'))
        self.bus.publisher('cmp2').publish(report('cmp2'))
        pub.stop()
        cache = self.bus.cache()
        cache.refresh()
        self.assertIsNone(cache.snapshot().get('cmp1'))
        self.assertIsNotNone(cache.snapshot().get('cmp2'))

    def test_freshness_is_judged_by_the_reports_timestamp(self):
        old = report('cmp1', timestamp=time.time() - 100)
        self.bus.publisher('cmp1').publish(old)
        cache = self.bus.cache()
        cache.refresh()
        self.assertIsNone(cache.snapshot().get('cmp1'))
        self.assertEqual(1, len(cache.snapshot()))
        self.assertEqual(old, cache.snapshot(
            now=old.timestamp + 29).get('cmp1'))

    def test_malformed_members_are_rejected_and_logged_others_kept(self):
        good = report('cmp-good')
        self.bus.publisher('cmp-good').publish(good)
        for member, body in [
                ('cmp-garbage', b'\x00not json at all'),
                ('cmp-future', b'{"version": "2.0", "host": "cmp-future", '
                 b'"timestamp": 1}'),
                ('cmp-big', b'{"pad": "%s"}' % (b'x' * 70000)),
                ('cmp-liar', hostreport.encode(report('cmp-good')))]:
            self.join_raw(member, signing.sign(
                self.host_key(member), statebus.group_id(self.conf.conf), 1,
                body))
        cache = self.bus.cache()
        cache.refresh()
        self.assertTrue(cache.healthy)
        self.assertEqual({'cmp-good': good}, cache.snapshot().reports)
        for reason in ('from cmp-garbage: report is not valid JSON',
                       'from cmp-future: report version 2.0',
                       'from cmp-big: report has',
                       'from cmp-liar: it names host cmp-good'):
            self.assertIn('Rejected host report ' + reason, self.log.output)

    def test_background_thread_refreshes(self):
        cache = self.bus.cache()
        self.assertEqual(0, len(cache.snapshot()))  # starts the thread
        self.assertTrue(cache.wait_for_refresh(1, timeout=30))
        r = report('cmp1')
        self.bus.publisher('cmp1').publish(r)
        self.assertTrue(cache.wait_for_refresh(2, timeout=30))
        self.assertEqual(r, cache.snapshot().get('cmp1'))
        cache.stop()
        self.assertFalse(cache.wait_for_refresh(1, timeout=0.3))

    def test_killed_publisher_goes_stale_by_its_timestamp(self):
        """A killed publisher process's report expires by its timestamp.

        A real agent-like process publishes and is SIGKILLed; the bus still
        returns its report, which counts as missing once too old.
        """
        max_age = 1.0
        self.conf.set('mlaccel_statebus', report_max_age=max_age)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [ROOT, os.environ.get('PYTHONPATH')])),
            PYTHONWARNINGS='ignore')
        proc = subprocess.Popen(
            [sys.executable, '-m', 'tests.unit.statebus.report_publisher',
             self.bus.url, 'cmp-dead', self.bus.host_key_file('cmp-dead'),
             self.conf.conf.mlaccel_statebus.publisher_state_dir],
            cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ''
        if not line.startswith('published '):
            proc.kill()
            self.fail('publisher process did not publish: %r %s'
                      % (line, proc.stderr.read()))
        stamp = float(line.split()[1])

        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual(stamp, cache.snapshot(now=stamp).get(
            'cmp-dead').timestamp)

        proc.kill()
        proc.wait()
        cache.refresh()
        # The bus still hands out the dead member's report...
        self.assertIn('cmp-dead', cache.snapshot().reports)
        self.assertIsNotNone(cache.snapshot(
            now=stamp + max_age - 0.1).get('cmp-dead'))
        # ...which counts as missing once older than report_max_age.
        self.assertIsNone(cache.snapshot(
            now=stamp + max_age + 0.01).get('cmp-dead'))
        time.sleep(max(0.0, stamp + max_age + 0.05 - time.time()))
        cache.refresh()
        self.assertIsNone(cache.snapshot().get('cmp-dead'))

    def test_publisher_rejoins_a_bus_that_lost_its_data(self):
        pub = self.bus.publisher('cmp1')
        pub.publish(report('cmp1'))
        self.wipe_bus()
        again = report('cmp1', cache_free_bytes=1)
        pub.publish(again)
        pub.publish(again)  # and updates it as before
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual({'cmp1': again}, cache.snapshot().reports)


class TestFileBus(BusTests, testcase.TestCase):
    BACKEND = 'file'

    def wipe_bus(self):
        # Moved away in one step first: a heartbeat writing into the tree
        # while rmtree walks it would make rmtree fail.
        groups = os.path.join(self.bus.path, 'groups')
        os.rename(groups, groups + '.wiped')
        shutil.rmtree(groups + '.wiped')

    def test_unreadable_bus_degrades_to_no_data_and_recovers(self):
        # Publisher and reader reach the bus through a symbolic link, which
        # one rename turns into a plain file and back: nothing can make the
        # directory again in between.
        link = self.bus.path + '.link'
        os.symlink(self.bus.path, link)
        self.addCleanup(os.remove, link)
        self.conf.set('mlaccel_statebus',
                      backend_url='file://%s?executor=synchronous' % link)
        pub = self.bus.publisher('cmp1')
        pub.publish(report('cmp1'))
        cache = self.bus.cache()
        cache.refresh()
        self.assertIsNotNone(cache.snapshot().get('cmp1'))

        pub.stop()
        with open(link + '.file', 'w') as f:
            f.write('not a directory')
        os.replace(link + '.file', link)
        cache.refresh()
        cache.refresh()
        self.assertIs(False, cache.healthy)
        self.assertEqual(0, len(cache.snapshot()))
        self.assertIsNone(cache.snapshot().get('cmp1'))
        self.assertEqual(1, self.log.output.count(
            'unreadable, scheduling without host reports'))

        # Back (as a remounted shared file system): the agent publishes
        # again and the reader sees its new report.
        os.symlink(self.bus.path, link + '.new')
        os.replace(link + '.new', link)
        again = report('cmp1', cache_free_bytes=1)
        self.bus.publisher('cmp1').publish(again)
        cache.refresh()
        self.assertIs(True, cache.healthy)
        self.assertEqual(again, cache.snapshot().get('cmp1'))
        self.assertIn('answers again', self.log.output)


class TestRedisBus(BusTests, testcase.TestCase):
    BACKEND = 'redis'

    def wipe_bus(self):
        self.bus.server.kill()
        self.assertTrue(self.bus.server.start())

    def test_reader_rides_out_a_redis_restart(self):
        """A Redis outage under a running reader: fallback, then recovery.

        While Redis is down the cache holds no reports, so the plugins act
        as stock Nova, and says why once. When Redis is back, empty, and
        the agent publishes again, the background thread serves the new
        report.
        """
        pub = self.bus.publisher('cmp1')
        pub.publish(report('cmp1'))
        cache = self.bus.cache()
        cache.snapshot()
        self.assertTrue(cache.wait_for_refresh(1, timeout=30))
        self.assertIsNotNone(cache.snapshot().get('cmp1'))

        self.bus.server.kill()
        self.assertTrue(self.wait_until(cache, lambda: not cache.healthy))
        self.assertEqual(0, len(cache.snapshot()))
        self.assertIsNone(cache.snapshot().get('cmp1'))
        self.assertIn('Connection refused', cache.last_error)
        self.assertTrue(cache.wait_for_refresh(1, timeout=120))
        self.assertIs(False, cache.healthy)
        self.assertEqual(1, self.log.output.count(
            'unreadable, scheduling without host reports'))

        self.assertTrue(self.bus.server.start())
        again = report('cmp1', cache_free_bytes=1)
        pub.publish(again)
        self.assertTrue(self.wait_until(
            cache, lambda: cache.snapshot().get('cmp1') == again))
        self.assertIs(True, cache.healthy)
        self.assertIsNone(cache.last_error)
        self.assertIn('answers again', self.log.output)

    def test_a_refused_client_fails_to_start_without_retrying(self):
        """A wrong password, then a dead Redis: start fails on first ask.

        tooz asks again 15 times, each after redis-py's own retries, about
        a minute in all; that it did not is told by the connections Redis
        received and by tooz's retry log lines, not by a clock.
        """
        import redis
        tooz_log = self.useFixture(fixtures.FakeLogger(
            name='tooz.drivers.redis', level=logging.DEBUG))
        admin = redis.Redis(port=self.bus.server.port)
        self.addCleanup(admin.close)
        admin.config_set('requirepass', 'right-pw')
        admin.execute_command('AUTH', 'right-pw')

        def connections():
            return admin.info('stats')['total_connections_received']

        self.conf.set('mlaccel_statebus', backend_url=(
            'redis://:wrong-pw@127.0.0.1:%d?executor=synchronous'
            % self.bus.server.port))
        before = connections()
        coord = statebus.coordinator(self.conf.conf, 'cmp1')
        exc = self.assertRaises(coordination.ToozConnectionError,
                                statebus.start, coord)
        self.assertIsInstance(exc.__cause__, redis.AuthenticationError)
        self.assertEqual(1, connections() - before)

        cache = self.bus.cache()
        cache.refresh()
        self.assertIs(False, cache.healthy)
        self.assertIn('invalid username-password', cache.last_error)
        self.assertEqual(2, connections() - before)

        self.bus.server.kill()
        coord = statebus.coordinator(self.conf.conf, 'cmp1')
        exc = self.assertRaises(coordination.ToozConnectionError,
                                statebus.start, coord)
        self.assertIsInstance(exc.__cause__, redis.ConnectionError)
        self.assertNotIn('will retry', tooz_log.output)


class TestRedisServerFixture(testcase.TestCase):

    def test_missing_redis_server_names_bindep(self):
        server = mlaccel_fixtures.RedisServer()
        server.binary = None
        exc = self.assertRaises(mlaccel_fixtures.RedisServerMissing,
                                server.check_installed)
        self.assertIn('bindep.txt', str(exc))


class TestEtcdBus(BusTests, testcase.TestCase):
    """The bus on a three-member etcd cluster, through tooz's etcd3gw."""

    BACKEND = 'etcd'

    def wipe_bus(self):
        self.bus.server.wipe()


class TestEtcdClusterFixture(testcase.TestCase):

    def test_a_port_taken_meanwhile_is_tried_again_elsewhere(self):
        """The first ports picked include one another process holds."""
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([busy])
        real = mlaccel_fixtures.free_port
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel_lab.testing.servers.free_port',
            lambda: next(picks, None) or real()))
        cluster = self.useFixture(mlaccel_fixtures.EtcdCluster())
        # The held port was picked first, and tried again elsewhere.
        self.assertIsNone(next(picks, None))
        self.assertNotIn(busy, cluster.client_ports + cluster.peer_ports)
        self.assertIn(cluster.leader(), range(3))

    def test_missing_etcd_names_bindep(self):
        cluster = mlaccel_fixtures.EtcdCluster()
        cluster.binary = None
        exc = self.assertRaises(mlaccel_fixtures.EtcdMissing,
                                cluster.check_installed)
        self.assertIn('bindep.txt', str(exc))
