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

"""Short smoke runs of the benchmarks that need no cloud.

A benchmark is not a test: its figures are judged by people, on a quiet
machine. These runs only check that each one still runs end to end at a
small size, in its own process as ``python -m mlaccel_lab.bench <name>``, and
ends with its ``RESULT`` line carrying every key its issue names, each a
number. The benchmarks on the all-in-one cloud have their smoke runs in
``tests/functional/aio/test_bench_smoke.py``; the task daemon's, which runs
the example task, in ``tests/task``, where torch is.
"""

import os

import fixtures
import testtools

from tests.benchsmoke import result_line


class BenchSmokeTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # The benchmarks choose their concurrency mode themselves; one
        # smoke run each is enough, in the functional env of native threads.
        if os.environ.get('OS_NOVA_DISABLE_EVENTLET_PATCHING') == '0':
            self.skipTest('smoke-run once, in the native-threads env')

    def test_scheduler(self):
        fields = result_line(self, 'scheduler', '--sizes', '1000',
                             '--rounds', '3')
        self.assertEqual({'sched_overhead_1k', 'statebus_refresh_1k_ms',
                          'fresh_reports_pct'}, set(fields))
        self.assertEqual(100.0, fields['fresh_reports_pct'])

    def test_statebus(self):
        fields = result_line(self, 'statebus', '--quick')
        self.assertEqual({'sched_total_cpu_ratio_10k_at_10rps',
                          'idle_refresh_cpu_pct_10k',
                          'report_propagation_p99_ms', 'failover_s'},
                         set(fields))

    def test_cinder(self):
        fields = result_line(self, 'cinder', '--sizes', '8', '--burst', '3',
                             '--rounds', '1')
        self.assertEqual({'prewarm_first_vs_builtin_warm',
                          'pool_hit_vs_builtin_warm',
                          'burst_makespan_vs_builtin', 'burst_downloads'},
                         set(fields))
        # One download for a burst, however many requests: a property of
        # the cache, not a timing.
        self.assertEqual(1.0, fields['burst_downloads'])

    def test_pools_demand(self):
        chart = os.path.join(self.useFixture(fixtures.TempDir()).path,
                             'curve.png')
        fields = result_line(self, 'pools-demand', '--days', '0.5',
                             '--chart', chart)
        self.assertEqual({'learned_vs_hindsight_static',
                          'saved_share_of_oracle_pct', 'hit_rate_pct',
                          'idle_s_per_saved_s', 'budget_exceeded'},
                         set(fields))
        self.assertEqual(0, fields['budget_exceeded'])
        self.assertTrue(os.path.getsize(chart))
