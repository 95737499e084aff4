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

"""CPU seconds by part, read from real processes that burn a known amount."""

import os
import subprocess
import sys
import textwrap

import fixtures

from mlaccel_lab.testing.aio import cpu
from mlaccel_lab.testing.aio import layout
from tests import testcase

#: CPU seconds each burner uses (its own process time, not wall time).
BURN = 0.3
#: What the kernel's counters may lose per process: they count whole clock
#: ticks.
TICKS = 0.05
_BURN = textwrap.dedent('''
    import time
    while time.process_time() < %r:
        pass
''' % BURN)
#: A service: burns, starts a child in its group that burns and is reaped,
#: then (a compute) starts a guest in a session of its own that burns and
#: is reaped, then waits to be sampled.
_SERVICE = textwrap.dedent('''
    import subprocess, sys, time
    burn = %r
    exec(burn)
    subprocess.run([sys.executable, '-c', burn], check=True)
    if sys.argv[1] == 'compute':
        subprocess.run([sys.executable, '-c', burn], check=True,
                       start_new_session=True)
    print('done', flush=True)
    time.sleep(60)
''' % _BURN)


class CpuTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.lay = layout.Layout(self.useFixture(fixtures.TempDir()).path)
        os.makedirs(self.lay.pids)

    def service(self, name, kind):
        proc = subprocess.Popen([sys.executable, '-c', _SERVICE, kind],
                                stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        with open(os.path.join(self.lay.pids, name + '.pid'), 'w') as f:
            f.write('%d\n' % proc.pid)
        return proc

    def test_each_part_is_what_its_processes_used(self):
        before = cpu.sample(self.lay)
        services = [self.service('glance', 'api'),
                    self.service('nova-compute-c1', 'compute')]
        for proc in services:
            self.assertEqual('done\n', proc.stdout.readline())
        used = cpu.used(before, cpu.sample(self.lay))
        # A service with its reaped child. What a compute reaped, its guest
        # and its own command, counts as guests.
        self.assertGreaterEqual(used['glance'], 2 * BURN - TICKS)
        self.assertLess(used['glance'], 3 * BURN)
        self.assertGreaterEqual(used['nova-compute-c1'], BURN - TICKS)
        self.assertLess(used['nova-compute-c1'], 2 * BURN)
        self.assertGreaterEqual(used[cpu.GUESTS], 2 * BURN - TICKS)
        self.assertLess(used[cpu.GUESTS], 3 * BURN)
        self.assertGreaterEqual(used[cpu.TOTAL], 5 * (BURN - TICKS))

    def test_a_service_restarted_counts_from_its_start(self):
        first = self.service('glance', 'api')
        self.assertEqual('done\n', first.stdout.readline())
        before = cpu.sample(self.lay)
        self.assertGreaterEqual(before.seconds['glance'], 2 * BURN - TICKS)
        first.kill()
        second = self.service('glance', 'api')
        self.assertEqual('done\n', second.stdout.readline())
        used = cpu.used(before, cpu.sample(self.lay))
        self.assertGreaterEqual(used['glance'], 2 * BURN - TICKS)
        self.assertLess(used['glance'], 3 * BURN)
