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

"""The cost model's seconds-to-task-start predictions."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from mlaccel import costmodel
from mlaccel import hostreport
from tests import fixtures as mlaccel_fixtures
from tests import testcase

GIB = 1024 ** 3
MIB = 1024 ** 2


def report(**fields):
    fields.setdefault('timestamp', 1.0)
    return hostreport.HostReport('cmp1', **fields)


def start(image_id='img', image_size=GIB):
    return costmodel.StartRequest(image_id, image_size)


class ModelTestCase(testcase.TestCase):
    """A model of known defaults: 100 MiB/s, 2 GiB, 10 s a build, 3 s."""

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.conf.set('mlaccel_costmodel',
                      default_fetch_bandwidth=100 * MIB,
                      default_image_size=2 * GIB,
                      default_build_seconds=10.0,
                      cold_start_seconds=3.0)
        self.model = costmodel.CostModel(self.conf.conf)


class TestCostModel(ModelTestCase):

    def test_without_report_every_default_applies(self):
        prediction = self.model.predict(None, start(image_size=GIB))
        self.assertEqual((GIB / (100 * MIB), 10.0, 3.0), prediction)
        self.assertAlmostEqual(10.24 + 10.0 + 3.0, prediction.total)

    def test_unknown_image_size_takes_the_default(self):
        self.assertEqual(2 * GIB / (100 * MIB), self.model.predict(
            None, start(image_size=None)).fetch)
        self.assertEqual(2 * GIB / (50 * MIB), self.model.predict(
            report(fetch_bandwidth=50 * MIB), start(image_size=None)).fetch)

    def test_cached_image_costs_no_transfer(self):
        cached = report(cached_images=frozenset({'img'}),
                        fetch_bandwidth=MIB)
        self.assertEqual(0.0, self.model.predict(cached, start()).fetch)
        self.assertEqual(GIB / MIB, self.model.predict(
            cached, start(image_id='other')).fetch)

    def test_volume_backed_request_fetches_nothing_known(self):
        # No image id: never counted as cached, size default if unknown.
        cached = report(cached_images=frozenset({'img'}))
        self.assertGreater(self.model.predict(
            cached, start(image_id=None, image_size=None)).fetch, 0)

    def test_measured_bandwidth_wins_over_the_default(self):
        self.assertEqual(GIB / (200 * MIB), self.model.predict(
            report(fetch_bandwidth=200 * MIB), start()).fetch)
        self.assertEqual(GIB / (100 * MIB), self.model.predict(
            report(fetch_bandwidth=0), start()).fetch)

    def test_build_queues_behind_builds_in_flight_at_measured_rate(self):
        # Little's law: 3 ahead at 0.5 builds/s, ours done after 8 s.
        self.assertEqual(8.0, self.model.predict(
            report(builds_in_flight=3, build_throughput=0.5), start()).build)
        self.assertEqual(2.0, self.model.predict(
            report(build_throughput=0.5), start()).build)

    def test_build_without_measured_rate_counts_waves_of_the_limit(self):
        self.assertEqual(10.0, self.model.predict(
            report(builds_in_flight=3, build_limit=4), start()).build)
        self.assertEqual(20.0, self.model.predict(
            report(builds_in_flight=4, build_limit=4), start()).build)
        self.assertEqual(30.0, self.model.predict(
            report(builds_in_flight=9, build_limit=4), start()).build)
        # No limit known: every build ahead is a wave of its own.
        self.assertEqual(30.0, self.model.predict(
            report(builds_in_flight=2, build_limit=0), start()).build)

    def test_every_host_is_predicted_a_cold_start(self):
        # No report says where a warm task-daemon slot waits.
        for r in (report(), None):
            self.assertEqual(3.0, self.model.predict(r, start()).buffering)

    def test_seconds_is_the_total(self):
        r = report(builds_in_flight=1, build_throughput=1.0)
        self.assertAlmostEqual(self.model.predict(r, start()).total,
                               self.model.seconds(r, start()))
        self.assertAlmostEqual(GIB / (100 * MIB) + 2.0 + 3.0,
                               self.model.seconds(r, start()))

    def test_queued_builds_count_like_builds_in_flight(self):
        self.assertEqual(self.model.predict(
            report(builds_in_flight=5, build_throughput=0.5), start()),
            self.model.predict(report(builds_in_flight=2,
                                      build_throughput=0.5), start(), 3))
        self.assertEqual(20.0, self.model.predict(
            report(builds_in_flight=1, build_limit=4), start(), 3).build)
        # Hosts without a report stay alike, whatever was sent there.
        self.assertEqual(self.model.predict(None, start()),
                         self.model.predict(None, start(), 7))

    def test_seconds_each_is_seconds_per_host(self):
        reports = [None, report(builds_in_flight=3, build_limit=2),
                   report(cached_images=frozenset({'img'}))]
        self.assertEqual([self.model.seconds(r, start()) for r in reports],
                         self.model.seconds_each(reports, start()))
        self.assertEqual(
            [self.model.seconds(r, start(), q)
             for r, q in zip(reports, (4, 1, 0))],
            self.model.seconds_each(reports, start(), [4, 1, 0]))

    def test_options_are_read_from_the_conf_given(self):
        self.conf.set('mlaccel_costmodel', default_build_seconds=42.0,
                      cold_start_seconds=7.0)
        model = costmodel.CostModel(self.conf.conf)
        self.assertEqual((42.0, 7.0), model.predict(None, start())[1:])

    def test_global_conf_by_default(self):
        self.useFixture(mlaccel_fixtures.GlobalConf()).set(
            'mlaccel_costmodel', default_build_seconds=5.0)
        self.assertEqual(5.0, costmodel.CostModel().predict(
            None, start()).build)

    def test_the_host_with_the_image_wins(self):
        hosts = {
            'cached': report(cached_images=frozenset({'img'})),
            'fast_net': report(fetch_bandwidth=1000 * MIB),
            'busy_cached': report(cached_images=frozenset({'img'}),
                                  builds_in_flight=8, build_throughput=0.1),
            'none': None,
        }
        ranked = sorted(hosts, key=lambda h: self.model.seconds(hosts[h],
                                                                start()))
        self.assertEqual(['cached', 'fast_net', 'none', 'busy_cached'],
                         ranked)

    def test_holders_stand_for_each_host_s_own_cache(self):
        hosts = [report(cached_images=frozenset({'img'})), report(), None]
        terms = [None if r is None else self.model.terms(r) for r in hosts]
        cached, by_index = [], []
        self.assertEqual(
            self.model.seconds_of(terms, start(), cached),
            self.model.seconds_of(terms, start(), by_index, {terms[0]}))
        self.assertEqual([True, False, False], cached)
        self.assertEqual(cached, by_index)

    @settings(max_examples=200, deadline=None)
    @given(st.integers(0, 1000), st.floats(0, 1e3), st.integers(0, 64),
           st.floats(1, 1e10))
    def test_more_load_or_less_bandwidth_never_predicts_sooner(
            self, in_flight, throughput, limit, bandwidth):
        def seconds(**changes):
            fields = dict(builds_in_flight=in_flight,
                          build_throughput=throughput, build_limit=limit,
                          fetch_bandwidth=bandwidth)
            fields.update(changes)
            return self.model.seconds(report(**fields), start())

        base = seconds()
        self.assertGreaterEqual(seconds(builds_in_flight=in_flight + 1),
                                base)
        self.assertGreaterEqual(seconds(fetch_bandwidth=bandwidth / 2), base)
        self.assertLessEqual(self.model.seconds(report(
            cached_images=frozenset({'img'}), builds_in_flight=in_flight,
            build_throughput=throughput, build_limit=limit,
            fetch_bandwidth=bandwidth), start()), base)


class TestPeers(ModelTestCase):
    """Figures a host has not measured, predicted from the others'."""

    def test_medians_of_the_measured_figures(self):
        peers = self.model.with_peers([
            report(fetch_bandwidth=200 * MIB, build_throughput=2.0,
                   build_limit=4),
            report(fetch_bandwidth=400 * MIB, build_throughput=1.0,
                   build_limit=4),
            report()])
        # 2 s and 4 s a build (the limit over the throughput).
        self.assertEqual((300 * MIB, 3.0),
                         (peers.fetch_bandwidth, peers.build_seconds))
        unmeasured = peers.predict(report(build_limit=4), start())
        self.assertEqual((GIB / (300 * MIB), 3.0), unmeasured[:2])
        # A host without a report keeps the defaults: nothing is known of
        # it, not even how busy it is. The model itself is unchanged.
        self.assertEqual(self.model.predict(None, start()),
                         peers.predict(None, start()))
        self.assertEqual((GIB / (100 * MIB), 10.0),
                         peers.predict(None, start())[:2])
        self.assertEqual(
            [peers.seconds(None, start())],
            peers.seconds_of([None], start()))
        self.assertEqual(10.0, self.model.build_seconds)

    def test_defaults_stay_for_a_figure_no_host_measured(self):
        peers = self.model.with_peers(
            [report(), report(fetch_bandwidth=50 * MIB)])
        self.assertEqual((50 * MIB, 10.0),
                         (peers.fetch_bandwidth, peers.build_seconds))
        self.assertEqual(self.model, self.model.with_peers([]))

    def test_options_stay_while_the_peers_change_the_model(self):
        peers = self.model.with_peers([report(build_throughput=1.0)])
        self.assertNotEqual(self.model, peers)
        self.assertEqual(self.model.options, peers.options)

    def test_a_host_measuring_both_figures_reads_no_default(self):
        measured = report(fetch_bandwidth=MIB, build_throughput=0.5,
                          build_limit=2)
        self.assertTrue(costmodel.CostModel.measured(measured))
        for other in (report(fetch_bandwidth=MIB),
                      report(build_throughput=0.5)):
            self.assertFalse(costmodel.CostModel.measured(other))
        peers = self.model.with_peers([report(fetch_bandwidth=9 * MIB,
                                              build_throughput=7.0)])
        self.assertEqual(self.model.terms(measured)[1:],
                         peers.terms(measured)[1:])


figures = st.builds(
    report, fetch_bandwidth=st.sampled_from([0.0, MIB, 3 * MIB, 7.5 * MIB]),
    build_throughput=st.sampled_from([0.0, 0.25, 1.0, 3.0]),
    build_limit=st.integers(0, 4))


class TestPeersKeptSorted(ModelTestCase):
    """The medians kept report by report, as a refresh updates them."""

    @settings(max_examples=60, deadline=None)
    @given(st.lists(figures, max_size=12), st.data())
    def test_added_and_removed_one_by_one_as_all_at_once(
            self, reports, data):
        peers = costmodel.Peers()
        held = []
        for r in reports:
            peers.add(r)
            held.append(r)
            if held and data.draw(st.booleans()):
                gone = held.pop(data.draw(st.integers(0, len(held) - 1)))
                peers.remove(gone)
            self.assertEqual(self.model.with_peers(held),
                             peers.model(self.model))
        self.assertEqual(costmodel.Peers(held).bandwidths, peers.bandwidths)
        self.assertEqual(costmodel.Peers(held).durations, peers.durations)

    def test_a_copy_is_its_own(self):
        peers = costmodel.Peers([report(fetch_bandwidth=MIB)])
        copied = peers.copy()
        copied.add(report(fetch_bandwidth=3 * MIB))
        self.assertEqual([MIB], peers.bandwidths)

    def test_removing_what_was_never_added_is_an_error(self):
        peers = costmodel.Peers([report(fetch_bandwidth=MIB)])
        self.assertRaises(ValueError, peers.remove,
                          report(fetch_bandwidth=2 * MIB))
        peers.remove(report())   # measured nothing: nothing to take out
        self.assertEqual([MIB], peers.bandwidths)
