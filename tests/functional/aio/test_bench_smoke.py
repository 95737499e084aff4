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

"""Short smoke runs of the benchmarks that run on the all-in-one cloud.

Needs a running cloud named by ``$MLACCEL_AIO_BASE``; skipped otherwise.
Each benchmark runs in its own process against that cloud at a small size
and must end with its ``RESULT`` line carrying every key its issue names.
Its figures are not judged here.
"""

import testtools

from mlaccel_lab.testing.aio import fixture
from tests.benchsmoke import result_line


class AioBenchSmokeTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixture.RunningCloud())

    def test_pool(self):
        fields = result_line(self, 'pool', '--runs', '1', '--steps', '2')
        self.assertEqual({'pooled_first_step_s', 'fresh_first_step_s',
                          'pooled_vs_fresh', 'idle_vm_s_per_task'},
                         set(fields))


class AioAgentBenchSmokeTest(testtools.TestCase):
    """The agent benchmark restarts the computes and agents: it runs alone."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixture.RunningCloud(exclusive=True))

    def test_agent(self):
        # One round of each part's arms: a smoke run, not a measure.
        fields = result_line(
            self, 'agent', '--image-mib', '8', '--burst', '4',
            '--burst-image-mib', '1', '--repetitions', '1', '--limits', '2')
        self.assertEqual({'first_boot_prefetch_ratio',
                          'first_boot_with_prefetch_ratio',
                          'burst_makespan_ratio'}, set(fields))
