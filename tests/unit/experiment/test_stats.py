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

"""Summaries, bootstrap reductions and contributions."""

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
        b, o = stats.paired(base, other, 'total')
        self.assertEqual([10.0, 4.0], b.tolist())
        self.assertEqual([5.0, 2.0], o.tolist())


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


class TestFromRecords(testcase.TestCase):

    def setUp(self):
        super().setUp()
        # A workload where most tasks boot from a volume (mirror shows).
        self.results = synthetic.results(seed=3, workload_seed=4)

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
            value, low, high = entry['total']
            self.assertLessEqual(low, value, arm)
            self.assertLessEqual(value, high, arm)
