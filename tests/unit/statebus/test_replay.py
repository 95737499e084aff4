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

"""Replays, rollbacks, missing keys and key rotation, tested as the attacks.

A real file or Redis bus, real publishers and a real report cache. The
attacker is any client of the bus: it can read every report, delete any
entry and join under any member id, but holds no key. Checks read the
cache as its last refresh left it (``current()``), refreshed by the test
alone: a refresh thread could land between an attacker's delete and its
join, when the host has no entry and so no report (safe, but not what a
check of the attacker's report is about).
"""

import os
import stat

import fixtures

from mlaccel import hostreport
from mlaccel import statebus
from mlaccel.statebus import keys
from mlaccel.statebus import publisher
from mlaccel.statebus import sequence
from mlaccel.statebus import signing
from tests import testcase
from tests.unit.statebus import test_statebus

report = test_statebus.report
VICTIM = 'cmp-victim'


class ReplayTests(test_statebus.BusTestBase):

    def setUp(self):
        super().setUp()
        self.cache = self.bus.cache()

    def publish_and_read(self, pub, r):
        """Publish ``r``, refresh; return the raw report the bus holds."""
        pub.publish(r)
        self.cache.refresh()
        self.assertEqual(r, self.cache.current().get(r.host))
        return self.held(r.host)

    def test_older_report_put_back_is_rejected(self):
        # The reproduction: builds in flight went 0 -> 8.
        pub = self.signed_publisher(VICTIM)
        busy = self.publish_and_read(pub, report(VICTIM, builds_in_flight=8))
        idle = report(VICTIM, builds_in_flight=0)
        self.publish_and_read(pub, idle)

        self.join_raw(VICTIM, busy, evict=True)
        self.cache.refresh()
        self.assertEqual(idle, self.cache.current().get(VICTIM))
        self.assertEqual(1, self.cache.replays_rejected)
        self.assertIn('Rejected host report from cmp-victim: it is not '
                      'newer than the last report accepted of this host',
                      self.log.output)

    def test_older_report_put_back_after_deleting_the_entry_is_rejected(self):
        pub = self.signed_publisher(VICTIM)
        busy = self.publish_and_read(pub, report(VICTIM, builds_in_flight=8))
        self.publish_and_read(pub, report(VICTIM, builds_in_flight=0))

        # The entry goes away (deleted, or the agent stopped); the reader
        # still remembers how far the host had got.
        pub.stop()
        self.cache.refresh()
        self.assertIsNone(self.cache.current().get(VICTIM))
        self.join_raw(VICTIM, busy)
        self.cache.refresh()
        self.assertIsNone(self.cache.current().get(VICTIM))
        self.assertEqual(1, self.cache.replays_rejected)

    def test_sequence_number_cannot_be_changed(self):
        pub = self.signed_publisher(VICTIM)
        busy = self.publish_and_read(pub, report(VICTIM, builds_in_flight=8))
        idle = report(VICTIM)
        idle_raw = self.publish_and_read(pub, idle)
        signed = signing.split(busy)
        bumped = busy.replace(b' %d ' % signed.sequence,
                              b' %d ' % (signed.sequence + 10 ** 6), 1)
        self.assertNotEqual(busy, bumped)
        self.join_raw(VICTIM, bumped, evict=True)
        self.cache.refresh()
        self.assertEqual(idle, self.cache.current().get(VICTIM))
        self.assertIn('signature does not verify', self.log.output)
        self.assertGreater(signing.split(idle_raw).sequence, signed.sequence)

    def test_restarted_publisher_goes_on_above_its_predecessor(self):
        first = self.signed_publisher(VICTIM)
        old = self.publish_and_read(first, report(VICTIM))
        first.stop()
        again = report(VICTIM, cache_free_bytes=1)
        new = self.publish_and_read(self.signed_publisher(VICTIM), again)
        self.assertGreater(signing.split(new).sequence,
                           signing.split(old).sequence)
        self.assertEqual(0, self.cache.replays_rejected)

    def test_newest_report_may_come_back(self):
        # A file bus publisher leaves and joins to update; a reader may see
        # the gap. The report it accepted last is still taken back.
        pub = self.signed_publisher(VICTIM)
        r = report(VICTIM)
        raw = self.publish_and_read(pub, r)
        pub.stop()
        self.cache.refresh()
        self.join_raw(VICTIM, raw)
        self.cache.refresh()
        self.assertEqual(r, self.cache.current().get(VICTIM))
        self.assertEqual(0, self.cache.replays_rejected)

    def test_older_publishers_reports_are_ordered_by_timestamp(self):
        # Readers are upgraded first: reports signed without a sequence
        # number are still used, newest timestamp first, until the host
        # signs sequence numbers; then they are refused.
        key = self.host_key(VICTIM).key
        group = statebus.group_id(self.conf.conf)
        older = report(VICTIM, builds_in_flight=8)
        newer = report(VICTIM, timestamp=older.timestamp + 1)
        old_raw = signing.sign_v1(key, group, hostreport.encode(older))
        for r in (older, newer):
            self.join_raw(VICTIM, signing.sign_v1(
                key, group, hostreport.encode(r)), evict=True)
            self.cache.refresh()
            self.assertEqual(r, self.cache.current().get(VICTIM))
        self.join_raw(VICTIM, old_raw, evict=True)
        self.cache.refresh()
        self.assertEqual(newer, self.cache.current().get(VICTIM))

        upgraded = report(VICTIM, timestamp=older.timestamp)
        self.signed_publisher(VICTIM).publish(upgraded)
        self.cache.refresh()
        self.assertEqual(upgraded, self.cache.current().get(VICTIM))
        self.join_raw(VICTIM, signing.sign_v1(key, group, hostreport.encode(
            report(VICTIM, timestamp=newer.timestamp + 1))), evict=True)
        self.cache.refresh()
        self.assertEqual(upgraded, self.cache.current().get(VICTIM))
        self.assertEqual(2, self.cache.replays_rejected)


class FailClosedTests(test_statebus.BusTestBase):

    def test_reader_without_a_deployment_key_uses_no_reports(self):
        self.signed_publisher('cmp1').publish(report('cmp1'))
        self.conf.set('mlaccel_statebus', deployment_key_file=None)
        cache = self.bus.cache()
        cache.refresh()
        cache.refresh()
        self.assertIs(False, cache.healthy)
        self.assertEqual({}, cache.current().reports)
        self.assertIn('allow_unsigned_reports', cache.last_error)
        self.assertEqual(1, self.log.output.count(
            'no [mlaccel_statebus] deployment_key_file'))

    def test_publisher_without_a_host_key_publishes_nothing(self):
        pub = publisher.Publisher('cmp1', self.conf.conf)
        self.addCleanup(pub.stop)
        self.assertRaisesRegex(keys.KeyFileError, 'no .* host_key_file',
                               pub.publish, report('cmp1'))
        self.conf.set('mlaccel_statebus', deployment_key_file=None,
                      allow_unsigned_reports=True)
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual({}, cache.current().reports)

    def test_host_key_file_names_its_hosts(self):
        # One file for a cinder-volume of two backends; a publisher signs
        # with its own host's key only.
        self.conf.set('mlaccel_statebus', host_key_file=self.bus.host_key_file(
            'node@a', 'node@b'))
        for host in ('node@a', 'node@b'):
            pub = publisher.Publisher(host, self.conf.conf)
            self.addCleanup(pub.stop)
            pub.publish(report(host))
        pub = publisher.Publisher('node@c', self.conf.conf)
        self.addCleanup(pub.stop)
        self.assertRaisesRegex(keys.KeyFileError, 'no key of host node@c',
                               pub.publish, report('node@c'))
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual({'node@a', 'node@b'}, set(cache.current().reports))


class RotationTests(test_statebus.BusTestBase):

    def test_both_keys_are_valid_during_a_rotation_then_only_the_new(self):
        path = self.conf.conf.mlaccel_statebus.deployment_key_file
        old = keys.read_deployment_keys(path)[0]
        self.signed_publisher('cmp-old').publish(report('cmp-old'))
        cache = self.bus.cache()
        cache.refresh()

        new_id, dropped = keys.rotate(path)
        self.assertEqual([], dropped)
        new, previous = keys.read_deployment_keys(path)
        self.assertEqual((new_id, old), (new.id, previous))
        self.signed_publisher('cmp-new', self.host_key(
            'cmp-new', new)).publish(report('cmp-new'))
        cache.refresh()
        self.assertEqual({'cmp-old', 'cmp-new'}, set(cache.current().reports))
        self.assertEqual((old.id, new.id),
                         (cache.key_id('cmp-old'), cache.key_id('cmp-new')))

        # The previous key retired: the file is read again at once.
        keys.replace_key(path, keys.format_deployment_keys([new]))
        cache.refresh()
        self.assertEqual({'cmp-new'}, set(cache.current().reports))
        self.assertIn('Rejected host report from cmp-old: report is signed '
                      'with key %s, which this reader does not hold'
                      % old.id, self.log.output)

    def test_restarted_agent_with_new_keys_replaces_its_old_entry(self):
        path = self.conf.conf.mlaccel_statebus.deployment_key_file
        self.signed_publisher('cmp1').publish(report('cmp1'))
        keys.rotate(path)
        new_keys = keys.derive_all(keys.read_deployment_keys(path), ['cmp1'])
        pub = publisher.Publisher('cmp1', self.conf.conf, host_keys=new_keys)
        self.addCleanup(pub.stop)
        again = report('cmp1', cache_free_bytes=1)
        pub.publish(again)
        cache = self.bus.cache()
        cache.refresh()
        self.assertEqual(again, cache.current().get('cmp1'))
        self.assertEqual(new_keys[0].id, cache.key_id('cmp1'))


class TestFileReplay(ReplayTests, testcase.TestCase):
    BACKEND = 'file'


class TestRedisReplay(ReplayTests, testcase.TestCase):
    BACKEND = 'redis'


class TestEtcdReplay(ReplayTests, testcase.TestCase):
    BACKEND = 'etcd'


class TestFileFailClosed(FailClosedTests, testcase.TestCase):
    BACKEND = 'file'


class TestFileRotation(RotationTests, testcase.TestCase):
    BACKEND = 'file'


class SequenceTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.now = 1000.0
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'state')
        self.path = sequence.path_of(self.dir, 'mlaccel.hosts', 'node@a')

    def numbers(self, count, step=1.0, seq=None):
        """``count`` numbers of ``seq`` (default: a new, restarted one)."""
        seq = seq or sequence.Sequence(self.path, clock=lambda: self.now)
        found = []
        for _ in range(count):
            found.append(seq.next())
            self.now += step
        return found

    def stored(self):
        with open(self.path) as f:
            return int(f.read())

    def test_numbers_follow_the_clock_and_never_go_back(self):
        seq = sequence.Sequence(self.path, clock=lambda: self.now)
        self.assertEqual([1000000, 1001000], self.numbers(2, seq=seq))
        self.now = 10.0  # the clock stepped back
        self.assertEqual([1001001, 1001002], self.numbers(2, seq=seq))

    def test_restart_goes_on_above_every_number_used(self):
        used = self.numbers(3, step=0.001)
        self.assertEqual(used[0] + sequence.RESERVE, self.stored())
        self.now = 0.0
        self.assertGreater(self.numbers(1)[0], max(used))
        self.assertEqual('sequence-mlaccel.hosts-node%40a',
                         os.path.basename(self.path))
        self.assertEqual(0o700, stat.S_IMODE(os.stat(self.dir).st_mode))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.path).st_mode))

    def test_lost_state_starts_again_from_the_clock(self):
        self.numbers(1)
        os.unlink(self.path)
        self.now += 60
        self.assertEqual([int(self.now * 1000)], self.numbers(1))

    def test_unreadable_state_is_an_error(self):
        os.makedirs(self.dir)
        with open(self.path, 'w') as f:
            f.write('garbage')
        self.assertRaisesRegex(sequence.SequenceError, 'remove it',
                               self.numbers, 1)
