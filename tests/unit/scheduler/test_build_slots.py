# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The build-slot filter on real Nova host states and request specs."""

import os
import time

import fixtures
from nova.scheduler import filters as nova_filters

from mlaccel.scheduler.filters import build_slots
from tests.unit.scheduler import base


class TestBuildSlotFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.filter = build_slots.BuildSlotFilter()

    def passing(self, hosts, spec=None):
        return [h.host for h in self.filter.filter_all(
            hosts, spec or base.request_spec())]

    def test_rejects_a_host_at_its_reported_limit(self):
        self.publish(self.report('full', builds_in_flight=4, build_limit=4),
                     self.report('over', builds_in_flight=9, build_limit=4),
                     self.report('free', builds_in_flight=3, build_limit=4),
                     self.report('no-limit', builds_in_flight=50))
        hosts = [base.host(n) for n in ('full', 'over', 'free', 'no-limit')]
        self.assertEqual(['free', 'no-limit'], self.passing(hosts))

    def _burst(self, count, in_flight, limit):
        """Place ``count`` instances as Nova does; hosts passed each time.

        Nova filters each instance from the hosts kept for the one before,
        and places it on the first (here: by name).
        """
        self.publish(*[self.report(h, builds_in_flight=in_flight,
                                   build_limit=limit) for h in ('h1', 'h2')])
        hosts = [base.host('h1', num_instances=5),
                 base.host('h2', num_instances=5)]
        spec = base.request_spec()
        spec.num_instances = count
        handler = nova_filters.HostFilterHandler()
        passed_each = []
        for index in range(count):
            hosts = handler.get_filtered_objects([self.filter], hosts, spec,
                                                 index)
            passed_each.append([h.host for h in hosts])
            # What HostState.consume_from_request does for a build.
            hosts[0].num_instances += 1
            hosts[0].num_io_ops += 1
        return passed_each, spec

    def test_a_burst_spreads_over_instances_placed_in_the_request(self):
        passed, spec = self._burst(2, in_flight=1, limit=2)
        # h1 took one: 1 + 1 = its limit, and h2 can take the last one.
        self.assertEqual([['h1', 'h2'], ['h2']], passed)
        # A new single-instance request starts from the reports again.
        spec.num_instances = 1
        self.assertEqual(['h1', 'h2'], [h.host for h in
                         nova_filters.HostFilterHandler().get_filtered_objects(
                             [self.filter], [base.host('h1'),
                                             base.host('h2')], spec, 0)])

    def test_separate_requests_count_builds_sent_since_the_report(self):
        # One slot each, no report between the requests: the scheduler's
        # own placement fills h1's slot until h1 reports again.
        h1 = self.bus.publisher('h1')
        h1.publish(self.report('h1', build_limit=1))
        self.publish(self.report('h2', build_limit=1))
        hosts = [base.host('h1', num_instances=3),
                 base.host('h2', num_instances=3)]
        self.assertEqual(['h1', 'h2'], self.passing(hosts))
        hosts[0].num_instances += 1  # consume_from_request placed one
        self.assertEqual(['h2'], self.passing(hosts))
        hosts[1].num_instances += 1
        # Every host full: all stay, a boot never fails.
        self.assertEqual(['h1', 'h2'], self.passing(hosts))
        # h1's next report counts its build; the baseline starts again.
        h1.publish(self.report('h1', builds_in_flight=0, build_limit=1))
        self.cache.refresh()
        self.assertEqual(['h1'], self.passing(hosts))

    def test_a_newer_compute_record_with_fewer_instances_is_the_baseline(self):
        self.publish(self.report('h1', build_limit=1),
                     self.report('h2', build_limit=1))
        hosts = [base.host('h1', num_instances=3), base.host('h2')]
        self.assertEqual(['h1', 'h2'], self.passing(hosts))
        hosts[0].num_instances = 1  # two instances deleted meanwhile
        self.assertEqual(['h1', 'h2'], self.passing(hosts))
        hosts[0].num_instances = 2  # one placed since: h1 is full
        self.assertEqual(['h2'], self.passing(hosts))

    def test_a_burst_beyond_the_free_slots_keeps_every_host(self):
        # Two free slots for three instances: dropping the first full host
        # would leave the third instance nowhere to go.
        passed, _ = self._burst(3, in_flight=1, limit=2)
        # Once h1 is over its limit, h2's slot takes the last instance.
        self.assertEqual([['h1', 'h2'], ['h1', 'h2'], ['h2']], passed)

    def test_a_burst_on_full_hosts_keeps_every_host(self):
        passed, _ = self._burst(4, in_flight=2, limit=2)
        self.assertEqual([['h1', 'h2']] * 4, passed)

    def test_missing_or_stale_report_fails_open_by_default(self):
        self.publish(self.report('stale', builds_in_flight=9, build_limit=1,
                                 timestamp=time.time() - 100))
        hosts = [base.host('stale'), base.host('missing')]
        self.assertEqual(['stale', 'missing'], self.passing(hosts))

    def test_fail_closed_when_configured(self):
        self.flags.set('mlaccel_scheduler', build_slot_fail_open=False)
        self.publish(self.report('ok', build_limit=4),
                     self.report('stale', timestamp=time.time() - 100))
        hosts = [base.host('ok'), base.host('stale'), base.host('missing')]
        self.assertEqual(['ok'], self.passing(hosts))

    def test_config_caps_the_reported_limit(self):
        self.flags.set('mlaccel_scheduler', max_builds_per_host=2)
        self.publish(self.report('big', builds_in_flight=2, build_limit=8),
                     self.report('unlimited', builds_in_flight=2),
                     self.report('small', builds_in_flight=1, build_limit=8))
        hosts = [base.host(n) for n in ('big', 'unlimited', 'small')]
        self.assertEqual(['small'], self.passing(hosts))

    def test_aggregate_caps_the_limit_smallest_wins(self):
        self.flags.set('mlaccel_scheduler', max_builds_per_host=10)
        self.publish(self.report('h1', builds_in_flight=2, build_limit=8),
                     self.report('h2', builds_in_flight=2, build_limit=8))
        capped = base.host('h1', aggregates=[
            {'mlaccel_max_builds_per_host': '5'},
            {'mlaccel_max_builds_per_host': '2'}])
        self.assertEqual(['h2'], self.passing([capped, base.host('h2')]))

    def test_bad_aggregate_value_is_ignored_and_logged(self):
        log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.flags.set('mlaccel_scheduler', max_builds_per_host=2)
        self.publish(self.report('h1', builds_in_flight=2, build_limit=8),
                     self.report('free'))
        bad = base.host('h1', aggregates=[
            {'mlaccel_max_builds_per_host': 'many'}])
        self.assertEqual(['free'], self.passing([bad, base.host('free')]))
        self.assertIn('mlaccel_max_builds_per_host', log.output)

    def test_rebuild_passes(self):
        self.publish(self.report('h1', builds_in_flight=4, build_limit=4))
        spec = base.request_spec(hints={'_nova_check_type': ['rebuild']})
        self.assertEqual(['h1'], self.passing([base.host('h1')], spec))
        self.assertFalse(build_slots.BuildSlotFilter.RUN_ON_REBUILD)

    def test_flavor_may_ignore_build_slots(self):
        self.publish(self.report('h1', builds_in_flight=4, build_limit=4),
                     self.report('h2', build_limit=4))
        hosts = [base.host('h1'), base.host('h2')]
        spec = base.request_spec(
            extra_specs={'mlaccel:build_slots': 'ignore'})
        self.assertEqual(['h1', 'h2'], self.passing(hosts, spec))
        enforce = base.request_spec(
            extra_specs={'mlaccel:build_slots': 'enforce'})
        self.assertEqual(['h2'], self.passing(hosts, enforce))

    def test_host_passes_and_nova_filter_handler(self):
        self.publish(self.report('full', builds_in_flight=4, build_limit=4),
                     self.report('free', build_limit=4))
        spec = base.request_spec()
        self.assertFalse(self.filter.host_passes(base.host('full'), spec))
        self.assertTrue(self.filter.host_passes(base.host('free'), spec))
        passed = nova_filters.HostFilterHandler().get_filtered_objects(
            [self.filter], [base.host('full'), base.host('free')], spec)
        self.assertEqual(['free'], [h.host for h in passed])

    def test_stopped_state_bus_leaves_stock_behaviour(self):
        publishers = self.publish(
            self.report('h1', builds_in_flight=4, build_limit=4),
            self.report('h2'))
        hosts = [base.host('h1'), base.host('h2')]
        self.assertEqual(['h2'], self.passing(hosts))
        # The bus becomes unreadable: its directory is now a plain file.
        # The publishers and the cache's refresh thread (the filter started
        # it) stop first: a heartbeat or a refresh would make the directory
        # again between the two steps.
        for publisher in publishers:
            publisher.stop()
        self.cache.stop()
        os.rename(self.bus.path, self.bus.path + '.away')
        with open(self.bus.path, 'w') as f:
            f.write('not a directory')
        self.addCleanup(os.rename, self.bus.path + '.away', self.bus.path)
        self.addCleanup(os.remove, self.bus.path)
        self.cache.refresh()
        self.assertIs(False, self.cache.healthy)
        self.assertEqual(['h1', 'h2'], self.passing(hosts))

    def test_every_host_full_keeps_them_all(self):
        # Refusing them all would turn the boot into NoValidHost, where
        # stock Nova queues the build on a compute.
        log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.publish(self.report('h1', builds_in_flight=4, build_limit=4),
                     self.report('h2', builds_in_flight=9, build_limit=2))
        hosts = [base.host('h1'), base.host('h2')]
        self.assertEqual(['h1', 'h2'], self.passing(hosts))
        self.assertIn('keeping every candidate', log.output)
        # Judged alone, a full host still has no free slot.
        self.assertFalse(self.filter.host_passes(hosts[0],
                                                 base.request_spec()))

    def test_fail_closed_without_any_report_keeps_every_host(self):
        self.flags.set('mlaccel_scheduler', build_slot_fail_open=False)
        hosts = [base.host('h1'), base.host('h2')]
        self.assertEqual(['h1', 'h2'], self.passing(hosts))

    def test_view_is_shared_with_the_weigher_of_the_same_request(self):
        from mlaccel.scheduler import request
        self.publish(self.report('h1', build_limit=4),
                     self.report('h2', builds_in_flight=4, build_limit=4))
        spec = base.request_spec()
        kept = self.filter.filter_all([base.host('h1'), base.host('h2')],
                                      spec)
        view = request.view(spec)
        self.assertIs(spec, view.spec)
        reports, aggregated, queued = view.reports_of(kept)
        self.assertEqual(['h1'], [r.host for r in reports])
        self.assertEqual([], aggregated)
        self.assertEqual({}, queued)
        # Handed out once; another spec never gets it.
        self.assertIsNot(view, request.view(spec))
        self.filter.filter_all(kept, spec)
        self.assertIsNot(spec, request.view(base.request_spec()).spec)

    def test_all_filters_lists_ours(self):
        from mlaccel.scheduler import filters
        self.assertEqual([build_slots.BuildSlotFilter],
                         filters.all_filters())
