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

"""The pure parts of ``python -m mlaccel_lab.bench agent``."""

from mlaccel import interleave
from mlaccel_lab.bench import agent
from tests import testcase


class TestInterleaved(testcase.TestCase):

    def test_every_arm_once_a_round_in_the_drawn_order(self):
        calls = []

        def measure(round_, arm):
            calls.append((round_, arm))
            return '%s@%d' % (arm, round_)

        samples, orders = agent._interleaved(
            (agent.COLD, agent.PREFETCHED), 4, 7, measure)
        self.assertEqual(
            interleave.orders((agent.COLD, agent.PREFETCHED), 4, 7), orders)
        self.assertEqual([(r, arm) for r, order in enumerate(orders)
                          for arm in order], calls)
        self.assertEqual({agent.COLD: ['cold@%d' % r for r in range(4)],
                          agent.PREFETCHED: ['prefetched@%d' % r
                                             for r in range(4)]}, samples)
        self.assertEqual('cold/prefetched prefetched/cold',
                         agent._orders_text([['cold', 'prefetched'],
                                             ['prefetched', 'cold']]))


class TestFirstBootSummary(testcase.TestCase):

    def test_medians_and_both_ratios(self):
        samples = {agent.COLD: [(0.0, 10.0), (0.0, 4.0), (0.0, 8.0)],
                   agent.PREFETCHED: [(1.0, 2.0), (5.0, 1.0), (3.0, 6.0)]}
        medians, ratios = agent.first_boot_summary(samples)
        # The pre-fetch plus its boot is summed round by round, then its
        # median taken (6), not the sum of the two medians (3 + 2).
        self.assertEqual({'cold boot': 8.0, 'pre-fetched boot': 2.0,
                          'pre-fetch + boot': 6.0}, medians)
        self.assertEqual({'first_boot_prefetch_ratio': 0.25,
                          'first_boot_with_prefetch_ratio': 0.75}, ratios)
        self.assertEqual(['first_boot_prefetch_ratio',
                          'first_boot_with_prefetch_ratio'], list(ratios))

    def test_one_round(self):
        medians, ratios = agent.first_boot_summary(
            {agent.COLD: [(0.0, 4.0)], agent.PREFETCHED: [(2.0, 1.0)]})
        self.assertEqual({'first_boot_prefetch_ratio': 0.25,
                          'first_boot_with_prefetch_ratio': 0.75}, ratios)
        self.assertEqual('cold boot 4.00 s, pre-fetched boot 1.00 s, '
                         'pre-fetch + boot 3.00 s',
                         agent._medians_text(medians))
