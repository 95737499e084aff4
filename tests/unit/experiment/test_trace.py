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

"""Task streams from a trace's figures, and from a file of its columns."""

import csv
import os

import fixtures

from mlaccel_lab.experiment import trace
from tests import testcase

COLUMNS = ('name', 'cpu_milli', 'memory_mib', 'num_gpu', 'gpu_milli',
           'gpu_spec', 'qos', 'pod_phase', 'creation_time', 'deletion_time',
           'scheduled_time')


def write_trace(path, rows):
    with open(path, 'w', newline='') as stream:
        writer = csv.writer(stream)
        writer.writerow(COLUMNS)
        for i, (created, gpus, memory) in enumerate(rows):
            writer.writerow(['pod-%d' % i, 1000, memory, gpus, 1000, '',
                             'LS', 'Running', created, created + 600,
                             created])


class TraceTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'trace.csv')
        # Two bursts of two at 1:00 on each of two days, and a lone task.
        rows = []
        for day in range(2):
            t = day * trace.DAY + 3600
            rows += [(t, 1, 8192), (t + 5, 8, 65536)]
        rows.append((7200, 0, 4096))
        write_trace(self.path, rows)
        self.rows = trace.read_rows(self.path)

    def test_figures_of_a_trace(self):
        figures = trace.derive(self.rows)
        self.assertEqual(5, figures['tasks'])
        self.assertEqual({'1': 1 / 3, '2': 2 / 3},
                         figures['burst_size_share'])
        self.assertAlmostEqual(2 / trace.DENSE_DAYS,
                               figures['bursts_per_hour_of_day'][1])
        self.assertEqual({'cpu.large': 0.2, 'gpu.large': 0.4,
                          'gpu.small': 0.4}, figures['flavor_share'])
        self.assertEqual({'1': 0.6, '8': 0.4}, figures['vms_share'])
        self.assertEqual(5.0, figures['gap_in_burst_quantiles_s'][0])

    def test_a_drawn_stream_is_seeded_and_follows_the_hours(self):
        figures = trace.derive(self.rows)
        images = trace.zipf_images(3)
        first = trace.draw(figures, 30, 7, images, scale=10)
        self.assertEqual(first, trace.draw(figures, 30, 7, images, scale=10))
        self.assertNotEqual(first, trace.draw(figures, 30, 8, images,
                                              scale=10))
        hours = {int(t.arrival % trace.DAY // 3600) for t in first}
        self.assertEqual({1, 2}, hours)
        self.assertEqual(sorted(t.arrival for t in first),
                         [t.arrival for t in first])
        self.assertLessEqual({t.image for t in first}, set(images))

    def test_the_shipped_figures_are_the_trace_s(self):
        figures = trace.load()
        self.assertIn('Weng et al.', figures['source'])
        self.assertEqual(24, len(figures['bursts_per_hour_of_day']))
        self.assertAlmostEqual(1.0, sum(figures['flavor_share'].values()))

    def test_a_trace_file_is_replayed_as_it_is(self):
        tasks = trace.from_trace(self.rows, 1, trace.zipf_images(2))
        self.assertEqual([3600.0, 3605.0, 7200.0, 90000.0, 90005.0],
                         [t.arrival for t in tasks])
        self.assertEqual([1, 8, 1, 1, 8], [t.vms for t in tasks])
        self.assertEqual(600.0, tasks[0].lifetime)
        self.assertEqual(3, len(trace.from_trace(self.rows, 1,
                                                 trace.zipf_images(2),
                                                 days=1)))
