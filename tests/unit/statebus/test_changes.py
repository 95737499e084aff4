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

"""Refreshes that read only what changed, on every backend.

A real file bus, a real Redis and a real three-member etcd cluster, real
publishers and a real report cache. Each test says what a refresh read:
everything (``full_reads``) or only what changed (``partial_reads``).
"""

import fixtures

from mlaccel import statebus
from mlaccel.statebus import drivers
from mlaccel.statebus.drivers import file as file_driver
from tests import testcase
from tests.unit.statebus import test_statebus

report = test_statebus.report


class ChangesTests(test_statebus.BusTestBase):

    def setUp(self):
        super().setUp()
        # A directory's time stamp is trusted at once here; the rule that
        # waits for it to settle has its own test.
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.statebus.drivers.file.SETTLE_SECONDS', 0))
        self.cache = self.bus.cache()

    def reads(self):
        return self.cache.full_reads, self.cache.partial_reads

    def refresh(self):
        """Refresh once; return (full reads, partial reads) it made."""
        before = self.reads()
        self.cache.refresh()
        self.assertTrue(self.cache.healthy, self.cache.last_error)
        return tuple(b - a for a, b in zip(before, self.reads()))

    def publish_hosts(self, count):
        pubs = [self.bus.publisher('cmp%d' % i) for i in range(count)]
        for pub in pubs:
            pub.publish(report(pub.host, builds_in_flight=1))
        return pubs

    def test_an_idle_bus_is_read_once_then_not_again(self):
        self.publish_hosts(3)
        self.assertEqual((1, 0), self.refresh())
        first = self.cache.current().reports
        for _ in range(3):
            self.assertEqual((0, 1), self.refresh())
        self.assertIs(first, self.cache.current().reports)

    def test_a_changed_report_is_read_without_the_others(self):
        pubs = self.publish_hosts(3)
        self.refresh()
        before = self.cache.current()
        new = report('cmp1', builds_in_flight=4)
        pubs[1].publish(new)
        self.assertEqual((0 if self.PARTIAL_ON_WRITE else 1,
                          1 if self.PARTIAL_ON_WRITE else 0), self.refresh())
        after = self.cache.current()
        self.assertEqual(new, after.get('cmp1'))
        for host in ('cmp0', 'cmp2'):
            self.assertIs(before.reports[host], after.reports[host])

    def test_a_partial_refresh_names_only_the_changed_reports(self):
        """What the cache derives (the scheduler's view) is told them."""
        seen = []
        derive = self.cache._derive

        def spy(reports, previous, changed=None):
            seen.append(None if changed is None else sorted(changed))
            return derive(reports, previous, changed)

        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.statebus.reader.ReportCache._derive',
            lambda cache, *args: spy(*args)))
        pubs = self.publish_hosts(3)
        self.refresh()
        self.assertEqual([None], seen)   # a full read: every host
        pubs[1].publish(report('cmp1', builds_in_flight=4))
        self.refresh()
        self.assertEqual(['cmp1'] if self.PARTIAL_ON_WRITE else None,
                         seen[-1])

    def test_a_member_that_left_is_dropped_at_the_next_refresh(self):
        pubs = self.publish_hosts(3)
        self.refresh()
        pubs[2].stop()
        self.refresh()
        self.assertEqual({'cmp0', 'cmp1'}, set(self.cache.current().reports))

    def test_a_new_member_is_read_at_the_next_refresh(self):
        self.publish_hosts(2)
        self.refresh()
        new = report('cmp9')
        self.bus.publisher('cmp9').publish(new)
        self.refresh()
        self.assertEqual(new, self.cache.current().get('cmp9'))

    def test_everything_is_read_again_after_the_full_read_interval(self):
        self.publish_hosts(1)
        self.refresh()
        self.cache.FULL_READ_INTERVAL = 0
        self.assertEqual((1, 0), self.refresh())

    def test_new_deployment_keys_make_a_full_read(self):
        self.publish_hosts(1)
        self.refresh()
        self.cache._key_stamp = None  # as if the key file changed
        self.assertEqual((1, 0), self.refresh())
        self.assertIsNotNone(self.cache.current().get('cmp0'))

    def test_a_bus_that_lost_its_data_is_read_in_full(self):
        pubs = self.publish_hosts(2)
        self.refresh()
        self.wipe()
        self.refresh()
        self.assertEqual(0, len(self.cache.current()))
        again = report('cmp0', builds_in_flight=2)
        pubs[0].publish(again)
        self.refresh()
        self.assertEqual(again, self.cache.current().get('cmp0'))

    def test_the_driver_returns_only_what_changed(self):
        pubs = self.publish_hosts(4)
        coord = statebus.coordinator(self.conf.conf, 'inspector')
        coord.start(start_heart=False)
        self.addCleanup(coord.stop)
        changes = drivers.for_client(coord, statebus.group_id(self.conf.conf))
        self.assertEqual(4, len(changes.read_all()))
        self.assertEqual({}, changes.read_changed())
        pubs[3].publish(report('cmp3', builds_in_flight=3))
        changed = changes.read_changed()
        if self.PARTIAL_ON_WRITE:
            self.assertEqual([b'cmp3'], list(changed))
        else:
            self.assertIsNone(changed)


class TestFileChanges(ChangesTests, testcase.TestCase):
    BACKEND = 'file'
    # Any write makes the next refresh read everything.
    PARTIAL_ON_WRITE = False

    def wipe(self):
        test_statebus.TestFileBus.wipe_bus(self)

    def test_a_fresh_directory_time_stamp_is_not_trusted(self):
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.statebus.drivers.file.SETTLE_SECONDS', 3600))
        self.publish_hosts(1)
        self.refresh()
        self.assertEqual((1, 0), self.refresh())
        self.assertGreater(file_driver.SETTLE_SECONDS, 0)


class TestRedisChanges(ChangesTests, testcase.TestCase):
    BACKEND = 'redis'
    PARTIAL_ON_WRITE = True

    def wipe(self):
        test_statebus.TestRedisBus.wipe_bus(self)

    def test_a_publisher_that_does_not_announce_is_read_every_time(self):
        """An older agent's writes are seen: every refresh reads all."""
        self.publish_hosts(1)
        self.refresh()
        key = self.host_key('cmp-old')
        coord = self.join_raw('cmp-old', self.sign(key, report('cmp-old')),
                              announce=False)
        self.refresh()
        self.assertIsNotNone(self.cache.current().get('cmp-old'))
        newer = report('cmp-old', builds_in_flight=5)
        coord.update_capabilities(statebus.group_id(self.conf.conf),
                                  self.sign(key, newer, sequence=2)).get()
        self.assertEqual((1, 0), self.refresh())
        self.assertEqual(newer, self.cache.current().get('cmp-old'))


class TestEtcdChanges(ChangesTests, testcase.TestCase):
    BACKEND = 'etcd'
    PARTIAL_ON_WRITE = True

    def wipe(self):
        self.bus.server.wipe()

    def test_a_write_by_any_client_is_seen_without_announcing(self):
        self.publish_hosts(1)
        self.refresh()
        key = self.host_key('cmp-raw')
        self.join_raw('cmp-raw', self.sign(key, report('cmp-raw')),
                      announce=False)
        self.refresh()
        self.assertIsNotNone(self.cache.current().get('cmp-raw'))
