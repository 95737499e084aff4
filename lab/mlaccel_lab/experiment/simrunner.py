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

"""The simulator as an experiment runner: arms run on a simulated cluster.

:class:`SimulatedRunner` is a :class:`~mlaccel_lab.experiment.runner.Runner`
(registered as ``sim``) whose runs are :class:`~mlaccel_lab.experiment.
simulator.Cluster` runs with a calibration's costs.
"""

from mlaccel_lab.experiment import calibration
from mlaccel_lab.experiment import runner as runner_mod
from mlaccel_lab.experiment import simulator


class SimulatedRunner(runner_mod.Runner):
    """Runs arms on :class:`~.simulator.Cluster` with a calibration's costs."""

    kind = 'simulator'
    measured = False

    def __init__(self, calibration, seed=0, prefill=False,
                 pool_options=None, flavor_of=None):
        """See :class:`~.simulator.Cluster` for ``prefill`` and after."""
        self.calibration = calibration
        self.seed = seed
        self.prefill = prefill
        self.pool_options = pool_options
        self.flavor_of = flavor_of
        self._runs = 0

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument(
            '--calibration', required=True, metavar='FILE',
            help='an experiment\'s results JSON to fit the stage costs '
                 'from, or a calibration file')

    @classmethod
    def from_options(cls, options):
        return cls(calibration.load(options.calibration)[0],
                   seed=options.order_seed)

    def prepare(self, workload):
        return {'hosts': self.calibration.hosts,
                'host_slots': self.calibration.host_slots,
                'vms': workload.vm_count(), 'tasks': len(workload.tasks)}

    def reset(self, arm):
        """Every :class:`Cluster` starts empty: nothing to do."""

    def run(self, arm, workload, done):
        self._runs += 1
        return simulator.Cluster(self.calibration, arm, workload,
                                 seed=self.seed * 1000003 + self._runs,
                                 label='sim-%d-%s' % (self._runs, arm.name),
                                 prefill=self.prefill,
                                 pool_options=self.pool_options,
                                 flavor_of=self.flavor_of).run(done)
