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

"""Whether the simulator reproduces a measured experiment at its own size.

:func:`validate` fits a calibration to the measured results (or takes
one), runs the simulator on the same workload, arms and repetitions, and
compares the two tables cell by cell: every arm's mean of each stage and
of the total. A cell is *judged* when it is the total or a stage holding
at least :data:`JUDGED_SHARE` of its arm's measured total (the relative
error of a stage of a few milliseconds says nothing); the validation
passes when every judged cell is within the tolerance (15 %).
"""

import dataclasses

from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import calibration as calibration_mod
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import stats
from mlaccel_lab.experiment import workload as workload_mod

TOLERANCE = 0.15
JUDGED_SHARE = 0.10
SIMULATED_REPETITIONS = 20
FIELDS = results_mod.STAGES + ('total',)


@dataclasses.dataclass(frozen=True)
class Cell:
    arm: str
    field: str
    measured: float
    simulated: float
    judged: bool

    @property
    def error(self):
        if not self.measured:
            return None
        return (self.simulated - self.measured) / self.measured


@dataclasses.dataclass
class Validation:
    cells: list
    tolerance: float = TOLERANCE
    calibration: object = None
    simulated: dict = None

    @property
    def judged(self):
        return [cell for cell in self.cells if cell.judged]

    @property
    def passed(self):
        return bool(self.judged) and all(
            abs(cell.error) <= self.tolerance for cell in self.judged)

    @property
    def worst(self):
        """The judged cell with the largest relative error."""
        return max(self.judged, key=lambda cell: abs(cell.error),
                   default=None)

    def format(self):
        lines = ['%-20s %-11s %10s %10s %8s' % (
            'arm', 'mean of', 'measured', 'simulated', 'error')]
        for cell in self.cells:
            error = cell.error
            lines.append('%-20s %-11s %10.2f %10.2f %8s%s' % (
                cell.arm, cell.field, cell.measured, cell.simulated,
                '-' if error is None else '%+.1f%%' % (100 * error),
                '' if cell.judged else '  (not judged)'))
        worst = self.worst
        lines.append('validation %s: %d judged cells, worst %s within '
                     '%.0f %%' % (
                         'PASSED' if self.passed else 'FAILED',
                         len(self.judged),
                         '-' if worst is None else '%s %s %+.1f %%' % (
                             worst.arm, worst.field, 100 * worst.error),
                         100 * self.tolerance))
        return '\n'.join(lines) + '\n'


def compare(measured, simulated, tolerance=TOLERANCE):
    """A :class:`Validation` of two results dicts' common arms."""
    cells = []
    simulated_arms = set(results_mod.arm_names(simulated))
    for arm in results_mod.arm_names(measured):
        if arm not in simulated_arms:
            continue
        ours = stats.arm_table(measured, arm)
        theirs = stats.arm_table(simulated, arm)
        total = ours['total']['mean']
        if total is None or theirs['total']['mean'] is None:
            continue
        for field in FIELDS:
            value = ours[field]['mean']
            cells.append(Cell(arm, field, value, theirs[field]['mean'],
                              value > 0 and (field == 'total' or
                                             value >= JUDGED_SHARE * total)))
    return Validation(cells, tolerance)


def validate(measured, calibration=None, seed=0, tolerance=TOLERANCE,
             repetitions=SIMULATED_REPETITIONS, progress=False):
    """Simulate ``measured``'s experiment at its size and compare.

    :param measured: an experiment's results dict.
    :param calibration: a :class:`~mlaccel_lab.experiment.calibration.
        Calibration`; fitted from ``measured`` when ``None``.
    :param repetitions: of each arm in the simulation (at least the
        measured number): the simulated table is an expectation, not one
        more draw of where VMs happened to land.
    """
    if calibration is None:
        calibration = calibration_mod.fit(measured)
    protocol = measured['protocol']
    # Pools filled before each run where the measured runner filled them
    # (the all-in-one runner always has; its records written before it
    # said so lack the precondition).
    prefill = bool(measured.get('preconditions', {}).get(
        runner.POOLS_PREFILLED, measured.get('runner') == 'aio'))
    simulated = runner.execute(
        simrunner.SimulatedRunner(calibration, seed, prefill=prefill),
        workload_mod.Workload.from_dict(measured['workload']),
        [arms_mod.Arm.from_dict(arm) for arm in measured['arms']],
        repetitions=max(repetitions, protocol['repetitions']), warmup=0,
        seed=protocol['seed'], progress=progress)
    result = compare(measured, simulated, tolerance)
    result.calibration = calibration
    result.simulated = simulated
    return result
