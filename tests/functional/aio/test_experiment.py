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
``$MLACCEL_AIO_BASE``; skipped otherwise. A stream of one 256 MiB image,
three boot-from-volume tasks, run once as stock and once as mlaccel, each
run after its reset and warm-up: the records' boundaries come from their
events, stock VMs copy the image into their volume, and mlaccel starts
with no pool and no demand, learns its pool from the stream's own launches
(never from the workload, which it cannot read) and claims from it; the
result line holds numbers.
"""

import math
import re
import threading
import time

import testtools

from mlaccel.pool import demand as pool_demand
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
    'tasks': {'count': 3, 'vms': {'min': 1, 'max': 1},
              'boot_from_volume': 1.0},
    'arrivals': {'duration': 1},
    'task': {'entry': 'clip', 'steps': 10, 'threads': 1},
}
#: Seconds after the first task the others arrive: time for the manager
#: to learn a pool from the first and warm a member.
LATER = (90.0, 100.0)


class BlindWorkload(wl.Workload):
    """A workload whose future demand cannot be read.

    The runner may only launch the tasks it is handed as they arrive.
    """

    def pool_keys(self):
        raise AssertionError('the runner read the workload\'s pool keys')

    def pool_bounds(self, *args, **kwargs):
        raise AssertionError('the runner read the workload\'s pool sizes')

    def vm_count(self):
        raise AssertionError('the runner read the workload\'s VM count')


def workload():
    made = wl.generate(wl.check_shape(SHAPE, 'smoke'))
    tasks = (made.tasks[0],) + tuple(
        wl.Task(i + 1, at, 'tiny', 1, wl.VOLUME, SHAPE['task']['steps'])
        for i, at in enumerate(LATER))
    return BlindWorkload(made.shape, made.seed, made.images, tasks)


class PoolWatch(threading.Thread):
    """When each pool key first appears in the store."""

    def __init__(self, store):
        super().__init__(daemon=True)
        self.store = store
        self.first = {}
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.2):
            now = time.time()
            for key in self.store.keys():
                self.first.setdefault(key, now)


class ExperimentOnCloudTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # It restarts the scheduler, cinder and the agents: it runs alone.
        self.aio = self.useFixture(fixture.RunningCloud(exclusive=True))

    def test_one_run_per_arm_pools_learned_not_foreseen(self):
        made = workload()
        runner = aiorunner.AioRunner(self.aio.layout.base)
        chosen = [arms.STOCK, arms.MLACCEL]
        out = results_mod.new(runner, made, chosen, 1, 0, 0)
        asks = {}
        watch = None
        try:
            out['preconditions'] = runner.prepare(made)
            for index, arm in enumerate(chosen):
                runner.reset(arm)
                runner.warm_up(arm)
                # What a fresh install has: no pool, no recorded demand.
                self.assertEqual([], list(runner.store.keys()))
                self.assertEqual([], runner.demand.read(
                    runner.project_id)['asks'])
                if arm.on(arms.POOL):
                    watch = PoolWatch(runner.store)
                    watch.start()
                outcome = runner.run(arm, made, lambda rec: None)
                if watch is not None:
                    watch.done.set()
                    asks = pool_demand.asks_by_key(
                        runner.demand.read(runner.project_id))
                out['runs'].append(results_mod.run_entry(
                    protocol.Run(0, index, arm, False), outcome, made))
        finally:
            if watch is not None:
                watch.done.set()
            # Every mechanism on again, as the cloud was brought up.
            runner.close()
        self.assertFalse(out['preconditions']['pools_prefilled_to_peak'])
        stock, mlaccel = out['runs']
        for run in out['runs']:
            for rec in run['records']:
                self.assertEqual('succeeded', rec['outcome'], rec['error'])
                self.assertIsNotNone(rec['arrival'])
                for vm in rec['vms']:
                    self.assertIsNotNone(vm['facts']['host'])
                    self.assertGreater(
                        vm['timeline']['durations']['running'], 0)
        # Stock: every volume a full copy of the image, and every boundary
        # from its defining event.
        stock_vms = [vm for rec in stock['records'] for vm in rec['vms']]
        for vm in stock_vms:
            self.assertTrue(vm['facts']['volume_copy'])
            boundaries = vm['timeline']['boundaries']
            self.assertEqual('nova-notification',
                             boundaries['scheduled']['source'])
            self.assertEqual('first_step', boundaries['started']['event'])
            self.assertGreater(vm['timeline']['durations']['scheduling'], 0)
        self.assertEqual(3, stock['costs']['volume_copies'])
        # mlaccel: the first task finds no pool; a pool appears only after
        # the stream asked for its key, and a later task claims from it.
        first_vm = mlaccel['records'][0]['vms'][0]
        self.assertIsNone(first_vm['pool'])
        self.assertTrue(watch.first, 'no pool was learned')
        for key, seen in watch.first.items():
            self.assertIn(key, asks)
            self.assertLess(min(t for t, _n in asks[key]), seen)
        later = [vm for rec in mlaccel['records'][1:] for vm in rec['vms']]
        self.assertTrue(any(vm['pool'] for vm in later), later)
        self.assertGreater(mlaccel['costs']['pool_member_vm_seconds'],
                           mlaccel['costs']['pool_idle_vm_seconds'])
        line = report.result_line(report.summarize(out))
        values = dict(re.findall(r'(\w+)=(\S+)', line))
        for key in ('overhead_reduction_pct', 'saved_s_per_task',
                    'hit_rate_pct', 'idle_vm_s_per_saved_s',
                    'total_reduction_pct_at_trace_lengths'):
            self.assertIn(key, values, line)
        for key in ('overhead_reduction_pct', 'saved_s_per_task',
                    'hit_rate_pct'):
            self.assertTrue(math.isfinite(float(values[key])), line)
