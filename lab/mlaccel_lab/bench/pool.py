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

"""Time to first training step: a warm pool against fresh VMs.

``python -m mlaccel_lab.bench pool [--runs 5] [--steps 20] [--base DIR]``
brings up the all-in-one cloud (or uses the running one at ``--base`` or
``$MLACCEL_AIO_BASE``), whose pool manager runs as a service, makes a new image
and a pool of one member for it (the example task's preload, reuse allowed),
and launches the example ``clip`` task on one VM ``--runs`` times fresh and
``--runs`` times from the pool, the two arms in an order drawn anew each round.
Before every launch of either arm the pool is settled (its one member idle,
nothing building), so no refill competes with a timed launch. Fresh VMs preload
the same runtime: the difference is creation, guest start and preload. A
launch's first-step time runs from the ``launch()`` call to the task's first
step as its daemon reports it (same host, same clock).
The last line is::

    RESULT pooled_first_step_s=<s> fresh_first_step_s=<s>
    pooled_vs_fresh=<r> idle_vm_s_per_task=<x>

medians of the first-step times, their ratio, and the pool's idle
VM-seconds per task it served (members idle at the end included).
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

from mlaccel.launcher import api
from mlaccel.pool import claims
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import pools
from mlaccel_lab.testing.aio import procs

IMAGE_BYTES = 64 << 20
SETTLE_TIMEOUT = 600.0


def _wait(predicate, what, timeout=SETTLE_TIMEOUT):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError('timed out waiting for %s' % what)
        time.sleep(0.2)


def _settled(store, key):
    """The pool's single member is idle and nothing else exists."""
    members = pool_store.members(store.read(key))
    return len(members) == 1 and members[0]['state'] == pool_store.IDLE


def _first_step(result, started):
    if result['outcome'] != api.SUCCEEDED:
        raise RuntimeError('launch failed: %s' % result['error'])
    vm, = result['vms']
    return vm, vm['observed']['first_step_at'] - started


class Bench:
    """One run of both arms on a running cloud."""

    def __init__(self, lay, runs, steps, seed):
        self.lay = lay
        self.runs = runs
        self.steps = steps
        self.rng = random.Random(seed)
        self.conf = pool_cli.configure([pools.config_file(lay)])
        self.conn = cloud.connect(lay)
        self.store = pool_cli.open_store(self.conf)
        self.flavor = lay.load_cloud()['flavor_id']
        self.times = {'fresh': [], 'pooled': []}
        self.orders = []

    def launch(self, image_id, warm_pool):
        started = time.time()
        result = api.launch(
            self.conn, image_id, self.flavor, 1, 'clip',
            {'steps': self.steps, 'seed': 1}, network='none', timeout=900,
            conf=self.conf, warm_pool=warm_pool,
            submit_options={'threads': 1, 'seed': 1})
        return _first_step(result, started)

    def run(self):
        image = self.conn.image.create_image(
            name='mlaccel-bench-pool', data=os.urandom(IMAGE_BYTES),
            disk_format='raw', container_format='bare')
        launcher = self.conf.mlaccel_launcher
        spec = pool_spec.PoolSpec(
            claims.project_of(self.conn), image.id, self.flavor,
            preload=launcher.preload, network='none',
            taskd_port=launcher.taskd_port)
        try:
            with self.store.transaction(spec.key, create=pool_store.new_state(
                    spec, 1, 1, 2 * self.runs + 1)):
                pass
            try:
                self._rounds(image.id, spec.key)
                return pool_cli.summary(self.store.read(spec.key),
                                        self.conf.mlaccel_pool)
            finally:
                with self.store.transaction(spec.key) as state:
                    state['bounds'] = {'min': 0, 'max': 0}
                _wait(lambda: not self.store.read(spec.key)['members'],
                      'the pool to empty')
                self.store.delete(spec.key)
        finally:
            self.conn.image.delete_image(image, ignore_missing=True)

    def _rounds(self, image_id, key):
        claimer = claims.Claimer(
            self.store, self.conn,
            timeout=self.conf.mlaccel_pool.health_timeout)
        for index in range(self.runs):
            order = ['fresh', 'pooled']
            self.rng.shuffle(order)
            self.orders.append(order)
            for arm in order:
                _wait(lambda: _settled(self.store, key), 'the pool to settle')
                vm, seconds = self.launch(
                    image_id, claimer if arm == 'pooled' else None)
                if (vm['pool'] == key) != (arm == 'pooled'):
                    raise RuntimeError(
                        '%s launch got pool %r' % (arm, vm['pool']))
                self.times[arm].append(seconds)
                print('round %d %-6s first step %.3f s'
                      % (index + 1, arm, seconds), flush=True)


def _parser():
    parser = argparse.ArgumentParser(prog='python -m mlaccel_lab.bench pool')
    parser.add_argument('--runs', type=int, default=5,
                        help='launches per arm (default: 5)')
    parser.add_argument('--steps', type=int, default=20,
                        help='training steps of each task (default: 20)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the arms\' order (default: 0)')
    parser.add_argument('--base', default=os.environ.get(
        aio_layout.BASE_ENV), help='state directory of a running all-in-one '
        'cloud to use (default: $%s; if unset, bring one up in a temporary '
        'directory and take it down)' % aio_layout.BASE_ENV)
    return parser


def main(argv):
    args = _parser().parse_args(argv)
    if args.runs < 1 or args.steps < 1:
        print('--runs and --steps must be at least 1', file=sys.stderr)
        return 2
    own = args.base is None
    base = args.base or tempfile.mkdtemp(prefix='mlaccel-bench-pool-')
    lay = aio_layout.Layout(base)
    if own:
        cloud.up(lay)
    elif not procs.running(lay, pools.SERVICE):
        print('no pool manager runs in the cloud at %s' % base,
              file=sys.stderr)
        return 2
    try:
        bench = Bench(lay, args.runs, args.steps, args.seed)
        summary = bench.run()
        manager_up = procs.running(lay, pools.SERVICE)
    finally:
        if own:
            cloud.down(lay, purge=True)
    fresh = statistics.median(bench.times['fresh'])
    pooled = statistics.median(bench.times['pooled'])
    print('preconditions: pool manager ran as a service of the cloud: %s; '
          'pool settled before every launch: yes; arm order per round: %s'
          % ('yes' if manager_up else 'NO',
             ' '.join('/'.join(o) for o in bench.orders)))
    for arm in ('fresh', 'pooled'):
        print('%s first step (s): %s' % (arm, ', '.join(
            '%.3f' % s for s in bench.times[arm])))
    print('pool: %d tasks served, %.1f idle VM-seconds, lead time %s s'
          % (summary['tasks_served'], summary['idle_vm_s'],
             '%.1f' % summary['lead_time_s'] if summary['lead_time_s']
             else '-'))
    print('RESULT pooled_first_step_s=%.3f fresh_first_step_s=%.3f '
          'pooled_vs_fresh=%.3f idle_vm_s_per_task=%.2f' % (
              pooled, fresh, pooled / fresh,
              summary['idle_vm_s_per_task'] or 0.0))
    return 0 if manager_up else 1
