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

"""Time to first step: a warm pool against fresh VMs.

``python -m mlaccel.bench pool [--runs 5] [--gap 0.5]``, run from the
source tree (it uses the functional tests' harness), brings up Nova's
in-process services (API, conductor, scheduler, placement, one compute
whose guests are real ``mlaccel-taskd`` processes) and launches one VM with
the functional tests' ``echo`` task ``--runs`` times fresh, then ``--runs``
times with a warm pool (minimum 1, its manager running), ``--gap``
seconds apart. A launch's first-step time is from the ``launch()`` call to
the task's first step as its daemon reports it. The pool's idle
VM-seconds include the members still idle at the end. The last line is::

    RESULT pooled_first_step_s=<s> fresh_first_step_s=<s>
    pooled_vs_fresh=<r> idle_vm_s_per_task=<x>

medians of the first-step times, their ratio, and the pool's idle
VM-seconds per task served. Native threads unless
``OS_NOVA_DISABLE_EVENTLET_PATCHING`` says otherwise.
"""

import os

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
from nova import monkey_patch; monkey_patch.patch()  # noqa: E402,E702

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

from mlaccel.pool import cli as pool_cli  # noqa: E402

RESULTS = {}


def _first_step(result, started):
    if result['outcome'] != 'succeeded':
        raise RuntimeError('launch failed: %s' % result['error'])
    return result['vms'][0]['observed']['first_step_at'] - started


def _case(runs, gap):
    from tests.functional.launcher import base
    from tests.functional.pool import base as pool_base

    class Bench(pool_base.PoolTestCase):

        def test_bench(self):
            fresh = []
            for _ in range(runs):
                started = time.time()
                result = base.api.launch(
                    self.conn, base.IMAGE, base.FLAVOR, 1, base.ECHO, {},
                    preload=pool_base.PRELOAD, timeout=60,
                    **pool_base.LAUNCH_OPTIONS)
                fresh.append(_first_step(result, started))
            self.create_pool(1, 2, max_tasks=runs + 1)
            # A round every few seconds, as deployed: a round in the middle
            # of a launch competes with it for this process's CPU.
            self.flags(interval=5.0, group='mlaccel_pool')
            manager = self.manager()
            thread = threading.Thread(target=manager.run, daemon=True)
            thread.start()
            try:
                self._wait_until(lambda: len(self.idle()) >= 1,
                                 'the pool to fill')
                pooled = []
                for _ in range(runs):
                    time.sleep(gap)
                    self._wait_until(lambda: len(self.idle()) >= 1,
                                     'an idle member')
                    started = time.time()
                    result = self.launch(1)
                    if not result['cleanup'].get('returned'):
                        raise RuntimeError('the VM did not come from the '
                                           'pool: %s' % result['cleanup'])
                    pooled.append(_first_step(result, started))
            finally:
                manager.stop()
                thread.join()
            summary = pool_cli.summary(self.state(), manager.group)
            RESULTS.update(fresh=fresh, pooled=pooled, summary=summary)

    return Bench('test_bench')


def main(argv):
    parser = argparse.ArgumentParser(prog='python -m mlaccel.bench pool')
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--gap', type=float, default=0.5,
                        help='seconds between pooled launches')
    args = parser.parse_args(argv)
    outcome = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(
        _case(args.runs, args.gap))
    if not outcome.wasSuccessful() or not RESULTS:
        return 1
    fresh = statistics.median(RESULTS['fresh'])
    pooled = statistics.median(RESULTS['pooled'])
    summary = RESULTS['summary']
    print('fresh first step (s): %s' % ', '.join(
        '%.3f' % s for s in RESULTS['fresh']))
    print('pooled first step (s): %s' % ', '.join(
        '%.3f' % s for s in RESULTS['pooled']))
    print('pool: %d tasks served, %.1f idle VM-seconds, lead time %.2f s'
          % (summary['tasks_served'], summary['idle_vm_s'],
             summary['lead_time_s'] or 0))
    print('RESULT pooled_first_step_s=%.3f fresh_first_step_s=%.3f '
          'pooled_vs_fresh=%.3f idle_vm_s_per_task=%.2f' % (
              pooled, fresh, pooled / fresh,
              summary['idle_vm_s_per_task'] or 0.0))
    return 0
