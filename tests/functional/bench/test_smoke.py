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
small size, in its own process as ``python -m mlaccel.bench <name>``, and
ends with its ``RESULT`` line carrying every key its issue names, each a
number. The benchmarks on the all-in-one cloud have their smoke runs in
``tests/functional/aio/test_bench_smoke.py``.
"""

import os
import subprocess
import sys

import testtools

TIMEOUT = 600


def result_line(testcase, name, *argv, env=None):
    """Run the benchmark; return its RESULT fields as ``{key: float}``."""
    proc = subprocess.run(
        [sys.executable, '-m', 'mlaccel.bench', name, *argv],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=TIMEOUT, env=dict(os.environ, **(env or {})))
    lines = proc.stdout.rstrip().splitlines()
    testcase.assertEqual(0, proc.returncode, '\n'.join(lines[-30:]))
    testcase.assertTrue(lines and lines[-1].startswith('RESULT '),
                        '\n'.join(lines[-30:]))
    fields = dict(item.split('=', 1) for item in lines[-1].split()[1:])
    return {key: float(value) for key, value in fields.items()}


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

    def test_taskd(self):
        fields = result_line(self, 'taskd', '--repeat', '1', '--steps', '1',
                             '--ready-repeat', '1')
        self.assertIn('warm_start_speedup', fields)
        self.assertIn('preload_s', fields)

    def test_cinder(self):
        fields = result_line(self, 'cinder', '--sizes', '8', '--burst', '3',
                             '--rounds', '2')
        self.assertEqual({'prewarm_first_vs_builtin_warm',
                          'pool_hit_vs_builtin_warm',
                          'burst_makespan_vs_builtin', 'burst_downloads'},
                         set(fields))
        # One download for a burst, however many requests: a property of
        # the cache, not a timing.
        self.assertEqual(1.0, fields['burst_downloads'])
