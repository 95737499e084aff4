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

"""Summaries, cluster bootstrap intervals and contributions."""

import numpy

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import results
from mlaccel_lab.experiment import stats
from tests import testcase
from tests.unit.experiment import synthetic


class TestSummaries(testcase.TestCase):

    def test_summary(self):
        found = stats.summary(range(1, 101))
        self.assertEqual(100, found['n'])
        self.assertAlmostEqual(50.5, found['mean'])
        self.assertAlmostEqual(50.5, found['p50'])
        self.assertAlmostEqual(95.05, found['p95'])
        self.assertIsNone(stats.summary([])['mean'])

    def test_paired_aligns_on_keys(self):
        base = [{'key': (0, 1), 'total': 10.0}, {'key': (0, 2), 'total': 4.0},
                {'key': (0, 3), 'total': 7.0}]
        other = [{'key': (0, 2), 'total': 2.0}, {'key': (0, 1), 'total': 5.0}]
        b, o, runs = stats.paired(base, other, 'total')
        self.assertEqual([10.0, 4.0], b.tolist())
        self.assertEqual([5.0, 2.0], o.tolist())
        self.assertEqual([0, 0], runs.tolist())

    def test_weighted_medians_are_those_of_the_repeated_values(self):
        rng = numpy.random.default_rng(2)
        for size in range(1, 9):
            values = rng.normal(size=size)
            weights = rng.integers(0, 4, size=(6, size))
            weights[:, 0] += 1
            self.assertEqual(
                [numpy.median(numpy.repeat(values, w)) for w in weights],
                stats.weighted_medians(values, weights).tolist())


class TestBootstrap(testcase.TestCase):

    def test_a_constant_ratio_has_a_point_interval(self):
        base = numpy.arange(1.0, 31.0)
        value, low, high = stats.bootstrap_reduction(base, 0.6 * base)
        for found in (value, low, high):
            self.assertAlmostEqual(40.0, found)

    def test_interval_covers_the_true_reduction_and_narrows_with_n(self):
        rng = numpy.random.default_rng(7)
        widths = []
        for n in (20, 400):
            base = rng.lognormal(3.0, 0.3, n)
            other = base * 0.7 * rng.lognormal(0.0, 0.1, n)
            value, low, high = stats.bootstrap_reduction(base, other, seed=1)
            self.assertLess(low, 30.0)
            self.assertGreater(high, 30.0)
            self.assertLessEqual(low, value)
            self.assertLessEqual(value, high)
            widths.append(high - low)
        self.assertLess(widths[1], widths[0] / 2)

    def test_mismatched_inputs(self):
        self.assertRaises(ValueError, stats.bootstrap_reduction, [1.0],
                          [1.0, 2.0])
        self.assertRaises(ValueError, stats.bootstrap_reduction, [], [])
        self.assertRaises(ValueError, stats.bootstrap_saved, [1.0], [1.0],
                          runs=[0, 1])


class TestClusterBootstrap(testcase.TestCase):

    #: Four runs of the same 30 tasks.
    BASE = numpy.tile(numpy.linspace(10.0, 40.0, 30), 4)
    RUNS = numpy.repeat(numpy.arange(4), 30)

    def test_identical_runs_give_a_point_interval(self):
        # Not a constant ratio: the row bootstrap would spread.
        other = self.BASE * 0.5 + numpy.tile(numpy.arange(30.0) % 7, 4)
        for estimate in (stats.bootstrap_reduction, stats.bootstrap_saved):
            value, low, high = estimate(self.BASE, other, self.RUNS)
            self.assertAlmostEqual(value, low)
            self.assertAlmostEqual(value, high)
            value, low, high = estimate(self.BASE, other)
            self.assertLess(low, value - 0.1)

    def test_an_outlying_run_widens_the_interval_beyond_the_rows(self):
        other = self.BASE * numpy.where(self.RUNS == 3, 0.9, 0.5)
        for estimate in (stats.bootstrap_reduction, stats.bootstrap_saved):
            value, low, high = estimate(self.BASE, other, self.RUNS)
            _, row_low, row_high = estimate(self.BASE, other)
            self.assertLessEqual(low, value)
            self.assertLessEqual(value, high)
            self.assertGreater(high - low, 1.5 * (row_high - row_low))

    def test_draws_take_whole_runs(self):
        runs = numpy.array([5, 5, 5, 8, 8, 9, 9, 9, 9])
        seen = []

        def statistic(weights):
            seen.append(weights)
            return weights[:, 0].astype(float)

        stats.cluster_bootstrap(statistic, runs, samples=300, seed=4)
        weights = numpy.concatenate(seen)
        self.assertEqual((300, runs.size), weights.shape)
        firsts = [numpy.flatnonzero(runs == run)[0] for run in (5, 8, 9)]
        for run, first in zip((5, 8, 9), firsts):
            # A run's pairs are all taken, as often, or none of them.
            for index in numpy.flatnonzero(runs == run):
                self.assertEqual(weights[:, first].tolist(),
                                 weights[:, index].tolist())
        # Each draw takes three runs; some draws repeat or leave one out.
        per_run = weights[:, firsts]
        self.assertEqual({3}, set(per_run.sum(axis=1).tolist()))
        self.assertIn(0, per_run)
        self.assertIn(3, per_run)


class TestFromRecords(testcase.TestCase):

    def setUp(self):
        super().setUp()
        # A workload where most tasks boot from a volume (mirror shows).
        self.results = synthetic.results(seed=3, workload_seed=4)
        self.arm = arms.without(arms.POOL).name

    def test_table_and_rows_leave_out_the_warmup(self):
        rows = results.task_rows(self.results, 'stock')
        tasks = len(self.results['workload']['tasks'])
        self.assertEqual(3 * tasks, len(rows))
        self.assertEqual({1, 2, 3}, {row['key'][0] for row in rows})
        for row in rows:
            self.assertAlmostEqual(
                row['total'], sum(row[s] for s in results.STAGES))
            self.assertAlmostEqual(row['overhead'],
                                   row['total'] - row['running'])
        table = stats.arm_table(self.results, 'stock')
        self.assertAlmostEqual(
            numpy.mean([row['creation'] for row in rows]),
            table['creation']['mean'])

    def test_running_share_is_of_the_stock_total(self):
        rows = results.task_rows(self.results, 'stock')
        share = stats.running_share_pct(self.results)
        self.assertAlmostEqual(
            100 * sum(r['running'] for r in rows)
            / sum(r['total'] for r in rows), share)
        self.assertGreater(share, 50.0)

    def test_mirror_alone_shows_a_positive_contribution(self):
        found = stats.contributions(self.results)
        self.assertGreater(found[arms.MIRROR]['alone'], 0.0)
        self.assertNotIn('lost_without', found[arms.MIRROR])
        self.assertNotIn(arms.POOL, found)

    def test_reductions_have_intervals_around_the_point(self):
        found = stats.reductions(self.results)
        self.assertNotIn('stock', found)
        for arm, entry in found.items():
            self.assertEqual({'total', 'overhead'}, set(entry))
            for field in entry:
                value, low, high = entry[field]
                self.assertLessEqual(low, value, arm)
                self.assertLessEqual(value, high, arm)

    def test_intervals_resample_repetitions(self):
        base = results.task_rows(self.results, 'stock')
        rows = results.task_rows(self.results, self.arm)
        b, o, runs = stats.paired(base, rows, 'overhead')
        self.assertEqual({1, 2, 3}, set(runs.tolist()))
        self.assertEqual(stats.bootstrap_reduction(b, o, runs, seed=5),
                         stats.reductions(self.results, seed=5)
                         [self.arm]['overhead'])
        self.assertEqual(stats.bootstrap_saved(b, o, runs, seed=5),
                         stats.saved_seconds(self.results, seed=5)
                         [self.arm])

    def test_seconds_saved_are_the_mean_over_paired_tasks(self):
        base = {r['key']: r['overhead']
                for r in results.task_rows(self.results, 'stock')}
        found = stats.saved_seconds(self.results)
        self.assertEqual(set(results.arm_names(self.results)) - {'stock'},
                         set(found))
        for arm, (value, low, high) in found.items():
            rows = results.task_rows(self.results, arm)
            self.assertAlmostEqual(
                numpy.mean([base[r['key']] - r['overhead'] for r in rows]),
                value)
            self.assertLessEqual(low, value, arm)
            self.assertLessEqual(value, high, arm)

    def test_an_arm_without_succeeded_tasks_has_no_interval(self):
        for run in results.kept_runs(self.results, self.arm):
            for rec in run['records']:
                rec['outcome'] = 'failed'
        self.assertIsNone(stats.saved_seconds(self.results)[self.arm])
        self.assertEqual({'total': None, 'overhead': None},
                         stats.reductions(self.results)[self.arm])
