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

"""The life-cycle weigher on real Nova host states."""

import time

from nova.scheduler import weights as nova_weights

from mlaccel.scheduler.weights import lifecycle
from tests.unit.scheduler import base

GIB = 1024 ** 3


def weigh(weigher, hosts, spec):
    """Nova's own pass: normalised weights times multipliers, best first."""
    return nova_weights.HostWeightHandler().get_weighed_objects(
        [weigher], hosts, spec)


class TestImageLocality(base.PluginTestCase):
    """The image-locality term alone (the predicted-start term is off)."""

    def setUp(self):
        super().setUp()
        self.flags.set('mlaccel_scheduler', lifecycle_weight_multiplier=0.0,
                       image_locality_weight_multiplier=1.0)
        self.weigher = lifecycle.LifecycleWeigher()

    def raw(self, hosts, spec=None):
        return self.weigher.weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts],
            spec or base.request_spec())

    def test_prefers_the_host_whose_report_holds_the_image(self):
        self.publish(
            self.report('h1', cached_images=frozenset({base.OTHER_IMAGE})),
            self.report('h2', cached_images=frozenset({base.IMAGE})),
            self.report('h3'))
        hosts = [base.host('h1'), base.host('h2'), base.host('h3')]
        self.assertEqual([0.0, 1.0, 0.0], self.raw(hosts))
        self.flags.set('mlaccel_scheduler',
                       image_locality_weight_multiplier=2.0)
        weighed = weigh(self.weigher, hosts, base.request_spec())
        self.assertEqual('h2', weighed[0].obj.host)
        self.assertEqual(2.0, weighed[0].weight)

    def test_without_reports_counts_loaded_instances_of_the_image(self):
        hosts = [base.host('h1', instances=[base.instance(base.OTHER_IMAGE)]),
                 base.host('h2', instances=[base.instance(base.IMAGE)]),
                 base.host('h3')]
        self.assertEqual([0.0, 1.0, 0.0], self.raw(hosts))

    def test_instance_stubs_are_never_lazy_loaded(self):
        stubs = [base.instance() for _ in range(3)]
        hosts = [base.host('h1', instances=stubs),
                 base.host('h2', instances=[base.instance(base.IMAGE)])]
        # An orphaned stub would raise if image_ref were lazy-loaded; the
        # attribute must stay unset (no database query per instance).
        self.assertEqual([0.0, 1.0], self.raw(hosts))
        for stub in stubs:
            self.assertFalse(stub.obj_attr_is_set('image_ref'))

    def test_a_fresh_report_is_believed_over_instances(self):
        self.publish(self.report('h1'))
        hosts = [base.host('h1', instances=[base.instance(base.IMAGE)]),
                 base.host('h2')]
        self.assertEqual([0.0, 0.0], self.raw(hosts))

    def test_a_stale_report_falls_back_to_instances(self):
        self.publish(self.report('h1', timestamp=time.time() - 100))
        hosts = [base.host('h1', instances=[base.instance(base.IMAGE)]),
                 base.host('h2')]
        self.assertEqual([1.0, 0.0], self.raw(hosts))

    def test_instances_are_walked_again_when_they_change(self):
        h1, h2 = base.host('h1'), base.host('h2')
        self.assertEqual([0.0, 0.0], self.raw([h1, h2]))
        inst = base.instance(base.IMAGE)
        h1.instances[inst.uuid] = inst
        self.assertEqual([1.0, 0.0], self.raw([h1, h2]))

    def test_volume_backed_request_weighs_nothing(self):
        self.publish(self.report('h1', cached_images=frozenset({base.IMAGE})))
        self.assertEqual([0.0, 0.0], self.raw(
            [base.host('h1'), base.host('h2')],
            base.request_spec(image_id=None)))

    def test_flavor_can_turn_it_off(self):
        self.publish(self.report('h1', cached_images=frozenset({base.IMAGE})))
        spec = base.request_spec(
            extra_specs={'mlaccel:image_locality': 'false'})
        self.assertEqual([0.0, 0.0], self.raw(
            [base.host('h1'), base.host('h2')], spec))

    def test_every_host_alike_weighs_zero_as_nova_normalises(self):
        self.publish(*[self.report(h, cached_images=frozenset({base.IMAGE}))
                       for h in ('h1', 'h2')])
        self.assertEqual([0.0, 0.0],
                         self.raw([base.host('h1'), base.host('h2')]))

    def test_multiplier_from_config_and_aggregate(self):
        self.flags.set('mlaccel_scheduler',
                       image_locality_weight_multiplier=4.0)
        self.publish(*[self.report(h, cached_images=frozenset({base.IMAGE}))
                       for h in ('plain', 'overridden', 'bad')],
                     self.report('without'))
        key = 'mlaccel_image_locality_weight_multiplier'
        hosts = [base.host('plain'), base.host('without'),
                 base.host('overridden', aggregates=[{key: '-1.5'}]),
                 base.host('bad', aggregates=[{key: 'lots'}])]
        weighed = weigh(self.weigher, hosts, base.request_spec())
        self.assertEqual({'plain': 4.0, 'bad': 4.0, 'without': 0.0,
                          'overridden': -1.5},
                         {w.obj.host: w.weight for w in weighed})

    def test_aggregate_override_changes_the_winner(self):
        self.publish(
            self.report('h1', cached_images=frozenset({base.IMAGE})),
            self.report('h2'))
        hosts = [base.host('h1', aggregates=[
            {'mlaccel_image_locality_weight_multiplier': '-1.0'}]),
            base.host('h2')]
        weighed = weigh(self.weigher, hosts, base.request_spec())
        self.assertEqual('h2', weighed[0].obj.host)
        self.assertEqual(-1.0, weighed[1].weight)


class TestPredictedStart(base.PluginTestCase):
    """The predicted-start term alone (the image-locality term is off)."""

    def setUp(self):
        super().setUp()
        self.flags.set('mlaccel_scheduler',
                       image_locality_weight_multiplier=0.0)
        self.weigher = lifecycle.LifecycleWeigher()

    def raw(self, hosts, spec=None):
        return self.weigher.weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts],
            spec or base.request_spec(image_size=GIB))

    def test_weight_is_minus_the_predicted_seconds_normalised(self):
        self.flags.set('mlaccel_costmodel', cold_start_seconds=3.0)
        self.flags.set('mlaccel_scheduler', lifecycle_weight_multiplier=1.0)
        cached = frozenset({base.IMAGE})
        # 4 s, 5 s and 7 s to task start: normalised as Nova does.
        self.publish(
            self.report('h1', cached_images=cached, build_throughput=1.0),
            self.report('h2', cached_images=cached, build_throughput=1.0,
                        builds_in_flight=1),
            self.report('h3', cached_images=cached, build_throughput=1.0,
                        builds_in_flight=3))
        self.assertEqual([1.0, 2.0 / 3, 0.0], self.raw(
            [base.host('h1'), base.host('h2'), base.host('h3')]))
        # Nova's own normalisation leaves the weights as they are.
        self.assertEqual((0.0, 1.0), (self.weigher.minval,
                                      self.weigher.maxval))
        self.assertEqual(1.0, self.weigher.weight_multiplier(
            base.host('h1', aggregates=[
                {'mlaccel_lifecycle_weight_multiplier': '5'}])))

    def test_prefers_the_host_that_starts_the_task_soonest(self):
        self.publish(
            self.report('slow-net', fetch_bandwidth=10 * 1024 ** 2),
            self.report('fast-net', fetch_bandwidth=1000 * 1024 ** 2),
            self.report('cached', cached_images=frozenset({base.IMAGE})),
            self.report('busy-cached', cached_images=frozenset({base.IMAGE}),
                        builds_in_flight=40, build_throughput=0.2))
        hosts = [base.host(n) for n in ('slow-net', 'busy-cached', 'cached',
                                        'no-report', 'fast-net')]
        order = [w.obj.host for w in weigh(self.weigher, hosts,
                                           base.request_spec(image_size=GIB))]
        # The host without a report is predicted from the defaults
        # (100 MiB/s, 10 s a build); "cached" builds at the median of the
        # build times measured (busy-cached's 5 s).
        self.assertEqual(['cached', 'fast-net', 'no-report', 'slow-net',
                          'busy-cached'], order)

    def test_a_host_not_measured_yet_weighs_like_its_measured_twin(self):
        # h1's agent has measured its builds and downloads; h2's agent
        # just started. Predicting h2 from the defaults (10 s a build,
        # 100 MiB/s) would send every build of a burst to h1.
        self.flags.set('mlaccel_costmodel', default_build_seconds=10.0,
                       default_fetch_bandwidth=100 * 1024 ** 2)
        self.publish(
            self.report('h1', build_limit=4, build_throughput=8.0,
                        fetch_bandwidth=2000 * 1024 ** 2),
            self.report('h2', build_limit=4),
            self.report('h3', build_limit=4, builds_in_flight=4))
        h1, h2, h3 = self.raw([base.host('h%d' % i) for i in (1, 2, 3)])
        self.assertEqual(h1, h2)
        # Its slots all taken, a host not measured yet still loses.
        self.assertGreater(h2, h3)

    def test_without_reports_every_host_weighs_the_same(self):
        hosts = [base.host('h%d' % i) for i in range(4)]
        self.assertEqual(1, len(set(self.raw(hosts))))
        self.assertEqual({0.0}, {w.weight for w in weigh(
            self.weigher, hosts, base.request_spec())})

    def test_a_burst_queues_where_the_builds_placed_so_far_end_soonest(self):
        self.publish(self.report('h1', builds_in_flight=4, build_limit=4),
                     self.report('h2', builds_in_flight=4, build_limit=4))
        h1, h2 = base.host('h1'), base.host('h2')
        # Both alike, until the scheduler sends a wave of the limit to h1
        # (consume_from_request counting each) before h1 reports again.
        self.assertEqual(1, len(set(self.raw([h1, h2]))))
        h1.num_instances += 4
        spec = base.request_spec()
        weights = self.weigher.weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in (h1, h2)], spec)
        self.assertGreater(weights[1], weights[0])

    def test_flavor_without_image_locality_ignores_the_cache(self):
        self.publish(
            self.report('h1', cached_images=frozenset({base.IMAGE})),
            self.report('h2'))
        spec = base.request_spec(
            image_size=GIB, extra_specs={'mlaccel:image_locality': 'false'})
        w1, w2 = self.raw([base.host('h1'), base.host('h2')], spec)
        self.assertEqual(w1, w2)

    def test_warm_start_in_the_flavor_weighs_alike(self):
        # No report says where a warm slot waits: both predict cold.
        self.publish(self.report('h1', build_throughput=1.0),
                     self.report('h2', build_throughput=0.5))
        hosts = [base.host('h1'), base.host('h2')]
        self.assertEqual(self.raw(hosts), self.raw(
            hosts, base.request_spec(
                image_size=GIB,
                extra_specs={'mlaccel:warm_start': 'false'})))

    def test_lifecycle_multiplier_from_config_and_aggregate(self):
        self.flags.set('mlaccel_scheduler', lifecycle_weight_multiplier=0.5)
        cached = frozenset({base.IMAGE})
        self.publish(self.report('fast', cached_images=cached),
                     self.report('slow'),
                     self.report('agg-fast', cached_images=cached))
        hosts = [base.host('fast'), base.host('slow'), base.host(
            'agg-fast', aggregates=[
                {'mlaccel_lifecycle_weight_multiplier': '7'}, {'x': 'y'}])]
        weighed = weigh(self.weigher, hosts, base.request_spec())
        self.assertEqual({'agg-fast': 7.0, 'fast': 0.5, 'slow': 0.0},
                         {w.obj.host: w.weight for w in weighed})


class TestBothTerms(base.PluginTestCase):

    def test_sum_is_what_two_nova_weighers_would_give(self):
        self.flags.set('mlaccel_scheduler',
                       image_locality_weight_multiplier=2.0,
                       lifecycle_weight_multiplier=3.0)
        cached = frozenset({base.IMAGE})
        self.publish(self.report('cached-busy', cached_images=cached,
                                 builds_in_flight=100, build_throughput=1.0),
                     self.report('idle', build_throughput=1e9))
        agg = {'mlaccel_image_locality_weight_multiplier': '10'}
        hosts = [base.host('cached-busy', aggregates=[agg]),
                 base.host('idle'), base.host('no-report')]
        weighed = {w.obj.host: w.weight for w in weigh(
            lifecycle.LifecycleWeigher(), hosts, base.request_spec())}
        # locality: 1, 0, 0 times 10 (aggregate), 2, 2; predicted start
        # normalised: idle soonest (1), the cached but busy host last (0).
        self.assertEqual(10.0, weighed['cached-busy'])
        self.assertEqual(3.0, weighed['idle'])
        self.assertGreater(weighed['no-report'], 0.0)
        self.assertLess(weighed['no-report'], 3.0)


class TestBridges(base.PluginTestCase):

    def test_all_weighers_lists_ours(self):
        from mlaccel.scheduler import weights
        self.assertEqual([lifecycle.LifecycleWeigher],
                         weights.all_weighers())
