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

"""The experiment's runner on the all-in-one cloud, one small run per arm.

Needs a running cloud (``python -m mlaccel_lab.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise. A workload of one 256 MiB image,
one image-backed task and one boot-from-volume task, run once as stock and
once as mlaccel: the records' boundaries come from their events, stock VMs
download the image and copy it into their volume, mlaccel's take theirs
from a warm pool, and the result line holds numbers.
"""

import math
import re

import testtools

from mlaccel_lab.experiment import aiorunner
from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import protocol
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import workload as wl
from mlaccel_lab.testing.aio import fixture

SHAPE = {
    'version': 1, 'seed': 1,
    'images': [{'name': 'tiny', 'size_mib': 256}],
    'tasks': {'count': 2, 'vms': {'min': 1, 'max': 1},
              'boot_from_volume': 0.0},
    'arrivals': {'duration': 1},
    'task': {'entry': 'clip', 'steps': 30, 'threads': 1,
             'min_running_share': 0.0},
}


def workload():
    made = wl.generate(wl.check_shape(SHAPE, 'smoke'))
    # One task of each boot kind, whatever the seed draws.
    tasks = (made.tasks[0], wl.Task(1, made.tasks[1].at, 'tiny', 1,
                                    wl.VOLUME, SHAPE['task']['steps']))
    return wl.Workload(made.shape, made.seed, made.images, tasks)


class ExperimentOnCloudTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # It restarts the scheduler, cinder and the agents: it runs alone.
        self.aio = self.useFixture(fixture.RunningCloud(exclusive=True))

    def test_one_run_per_arm(self):
        made = workload()
        runner = aiorunner.AioRunner(self.aio.layout.base)
        runner.time_scale = 0.0
        chosen = [arms.STOCK, arms.MLACCEL]
        out = results_mod.new(runner, made, chosen, 1, 0, 0)
        try:
            out['preconditions'] = runner.prepare(made)
            for index, arm in enumerate(chosen):
                runner.reset(arm)
                outcome = runner.run(arm, made, lambda rec: None)
                out['runs'].append(results_mod.run_entry(
                    protocol.Run(0, index, arm, False), outcome, made))
        finally:
            # Every mechanism on again, as the cloud was brought up.
            runner.close()
        stock, mlaccel = out['runs']
        for run in out['runs']:
            for rec in run['records']:
                self.assertEqual('succeeded', rec['outcome'], rec['error'])
                for vm in rec['vms']:
                    self.assertIsNotNone(vm['facts']['host'])
                    self.assertGreater(
                        vm['timeline']['durations']['running'], 0)
        # Stock: the image is downloaded, its volume a full copy, and
        # every boundary comes from its defining event.
        stock_vms = [vm for rec in stock['records'] for vm in rec['vms']]
        image_vm, volume_vm = stock_vms
        self.assertEqual(256 << 20, image_vm['facts']['glance_bytes'])
        self.assertTrue(volume_vm['facts']['volume_copy'])
        for vm in stock_vms:
            boundaries = vm['timeline']['boundaries']
            self.assertEqual('nova-notification',
                             boundaries['scheduled']['source'])
            self.assertEqual('first_step', boundaries['started']['event'])
            self.assertGreater(vm['timeline']['durations']['scheduling'], 0)
            self.assertGreater(vm['timeline']['durations']['creation'], 0)
        self.assertGreaterEqual(stock['costs']['glance_bytes'], 2 * 256 << 20)
        self.assertEqual(1, stock['costs']['volume_copies'])
        # mlaccel: warm members first (the pool holds the peak), any made
        # fresh is scheduled and built for real; the pool's idle time is a
        # cost.
        mlaccel_vms = [vm for rec in mlaccel['records'] for vm in rec['vms']]
        self.assertTrue(any(vm['pool'] for vm in mlaccel_vms), mlaccel_vms)
        for vm in mlaccel_vms:
            if not vm['pool']:
                self.assertGreater(
                    vm['timeline']['durations']['scheduling'], 0)
        self.assertGreater(mlaccel['costs']['pool_idle_vm_seconds'], 0)
        line = report.result_line(report.summarize(out))
        values = dict(re.findall(r'(\w+)=(\S+)', line))
        for key in ('total_reduction_pct', 'overhead_reduction_pct',
                    'running_share_pct'):
            self.assertTrue(math.isfinite(float(values[key])), line)
