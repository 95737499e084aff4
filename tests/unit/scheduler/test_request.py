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

"""What the report cache works out once per report, and the per-request
view that the filter and the weigher share."""

import time

from mlaccel import conf as mlaccel_conf
from mlaccel import costmodel
from mlaccel.scheduler.filters import build_slots
from mlaccel.scheduler import hostview
from mlaccel.scheduler import request
from mlaccel.scheduler.weights import lifecycle
from tests.unit.scheduler import base


class SnapshotLookupTest(base.PluginTestCase):

    def test_a_stale_report_is_never_looked_up_by_the_fast_path(self):
        now = time.time()
        self.publish(self.report('fresh', timestamp=now),
                     self.report('old', timestamp=now - 10))
        # Every report fresh: a plain lookup.
        self.assertEqual(self.cache.current(now).entries.get,
                         self.cache.current(now).lookup())
        later = self.cache.current(now + 25)
        get = later.lookup()
        self.assertIsNotNone(get('fresh'))
        self.assertIsNone(get('old'))
        self.assertIsNone(get('unknown'))

    def test_a_snapshot_without_the_oldest_time_checks_each_report(self):
        report = self.report('h1', timestamp=time.time() - 3600)
        snapshot = hostview.Snapshot({'h1': report}, time.time(), 30.0)
        self.assertIsNone(snapshot.lookup()('h1'))


class PrecomputedTermsTest(base.PluginTestCase):

    REPORTS = [
        dict(build_limit=4, builds_in_flight=1, build_throughput=0.5,
             cached_images=frozenset([base.IMAGE])),
        dict(build_limit=0, builds_in_flight=3, build_throughput=0.0,
             fetch_bandwidth=5e7),
        dict(build_limit=2, builds_in_flight=2, build_throughput=1.5,
             fetch_bandwidth=3e8),
    ]

    def test_terms_of_an_entry_give_the_cost_model_s_seconds(self):
        model = costmodel.CostModel(mlaccel_conf.CONF)
        reports = [self.report('h%d' % i, **fields)
                   for i, fields in enumerate(self.REPORTS)] + [None]
        for image_id in (base.IMAGE, base.OTHER_IMAGE, None):
            start = costmodel.StartRequest(image_id, 10 ** 9)
            cached, cached_too = [], []
            self.assertEqual(
                model.seconds_each(reports, start, cached=cached),
                model.seconds_of(
                    [None if r is None else
                     hostview.Entry(r.host, r, model)
                     for r in reports], start, cached_too))
            self.assertEqual(cached, cached_too)

    def test_the_holders_index_follows_each_refresh(self):
        def hosts(snapshot, image):
            holders = snapshot.holders(image)
            for entry in holders:
                self.assertIs(snapshot.entries[entry.host], entry)
            return {entry.host for entry in holders}

        h1 = self.bus.publisher('h1')
        h1.publish(self.report('h1', cached_images=frozenset([base.IMAGE])))
        self.publish(self.report('h2', cached_images=frozenset(
            [base.IMAGE, base.OTHER_IMAGE])))
        old = self.cache.current()
        self.assertEqual({'h1', 'h2'}, hosts(old, base.IMAGE))
        h1.publish(self.report('h1', cached_images=frozenset(
            [base.OTHER_IMAGE])))
        self.cache.refresh()
        new = self.cache.current()
        self.assertEqual({'h2'}, hosts(new, base.IMAGE))
        self.assertEqual({'h1', 'h2'}, hosts(new, base.OTHER_IMAGE))
        self.assertEqual(set(), hosts(new, 'unknown'))
        # A snapshot taken before keeps its own.
        self.assertEqual({'h1', 'h2'}, hosts(old, base.IMAGE))
        self.assertEqual({'h2'}, hosts(old, base.OTHER_IMAGE))
        # A snapshot made from reports alone indexes them itself.
        alone = hostview.Snapshot(new.reports, new.now, 30.0)
        self.assertEqual({'h1', 'h2'}, hosts(alone, base.OTHER_IMAGE))

    def test_a_change_of_the_peers_remakes_only_unmeasured_entries(self):
        measured = dict(build_limit=2, build_throughput=1.0,
                        fetch_bandwidth=1e8)
        other = self.bus.publisher('other')
        other.publish(self.report('other', build_throughput=1.0))
        self.publish(self.report('m', **measured), self.report('u'))
        before = self.cache.current()
        # A new report of "other" moves the median build time.
        other.publish(self.report('other', build_throughput=0.25))
        self.cache.refresh()
        after = self.cache.current()
        self.assertNotEqual(before.model, after.model)
        self.assertEqual(before.model.options, after.model.options)
        self.assertIs(before.entries['m'], after.entries['m'])
        self.assertIsNot(before.entries['u'], after.entries['u'])
        for host in ('m', 'u', 'other'):
            entry = after.entries[host]
            self.assertEqual(after.model.terms(entry)[1:],
                             (entry.per_byte, entry.fixed))
        # The weigher's model is the refresh's, unless the options change.
        view = request.RequestView(base.request_spec())
        self.assertEqual(after.model, view.model())
        self.flags.set('mlaccel_costmodel', cold_start_seconds=99.0)
        self.assertEqual(costmodel.CostModel(mlaccel_conf.CONF),
                         view.model())

    def test_free_slots_of_an_entry(self):
        frees = [hostview.Entry('h', self.report('h', **fields)).free
                 for fields in self.REPORTS]
        self.assertEqual([3, float('inf'), 0], frees)

    def test_options_changed_since_the_refresh_are_used(self):
        self.publish(*[self.report('h%d' % i, **fields)
                       for i, fields in enumerate(self.REPORTS)])
        # The refresh thread (60 s apart) refreshes once as it starts: that
        # refresh must be over before the options change.
        refreshed = self.cache.refreshes
        self.cache.start()
        for _ in range(100):
            if self.cache.refreshes > refreshed:
                break
            self.cache.wait_for_refresh(1, 0.1)
        self.assertGreater(self.cache.refreshes, refreshed)
        self.flags.set('mlaccel_costmodel', cold_start_seconds=1000.0)
        spec = base.request_spec(image_size=10 ** 9)
        hosts = [base.host('h%d' % i) for i in range(len(self.REPORTS))]
        view = request.RequestView(spec)
        predicted, _ = view.predict(hosts, costmodel.CostModel(
            mlaccel_conf.CONF))
        model = costmodel.CostModel(mlaccel_conf.CONF)
        self.assertNotEqual(model, view.reports.model)
        self.assertEqual(
            model.seconds_each([view.reports.entry(h.host) for h in hosts],
                               view.start), predicted)


class SharedViewTest(base.PluginTestCase):

    def test_weights_after_the_filter_equal_the_weigher_s_own(self):
        self.publish(*[self.report('h%d' % i, **fields)
                       for i, fields in enumerate(
                           PrecomputedTermsTest.REPORTS)])
        hosts = [base.host('h%d' % i) for i in range(3)] + [base.host('h9')]
        spec = base.request_spec(image_size=10 ** 9)
        weigher = lifecycle.LifecycleWeigher()
        alone = weigher.weigh_hosts([hosts[0], hosts[1], hosts[3]],
                                    request.RequestView(spec))
        kept = build_slots.BuildSlotFilter().filter_all(hosts, spec)
        self.assertEqual(['h0', 'h1', 'h9'], [h.host for h in kept])
        shared = request.view(spec)
        self.assertEqual(alone, weigher.weigh_hosts(kept, shared))
        # Asked again, the view predicts nothing anew.
        self.assertIs(shared.predict(kept, costmodel.CostModel())[0],
                      shared.predict(kept, costmodel.CostModel())[0])
