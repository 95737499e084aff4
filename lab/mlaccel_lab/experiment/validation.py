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

Of an arm with pools, the median overhead is judged apart for the tasks a
pool served whole (hits) and the others (misses), with the hit rate: the
mixture of the two is bimodal, and its median, shown but not judged,
jumps from one mode to the other as the hit rate crosses one half.

Beside the cells, not judged, the full volume copies of each arm that made
any, measured or simulated (:func:`copies`): how many a run, how long one
took and how many others were in flight meanwhile. A copy's time depends
on how many share the backend, so a creation cell off by much is read
there first.
"""

import dataclasses

from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import calibration as calibration_mod
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import simulator
from mlaccel_lab.experiment import stats
from mlaccel_lab.experiment import workload as workload_mod

TOLERANCE = 0.15
#: Percentage points a simulated hit rate may be off the measured one.
HIT_TOLERANCE = 15.0
HIT_RATE = 'hit rate %'
MEDIAN = 'median overhead'
#: The median overhead of an arm's hits and of its misses.
MEDIAN_OF = {True: 'median overhead, hits', False: 'median overhead, misses'}
#: Tasks of each kind, measured and simulated, a judged median needs.
MIN_TASKS = 3
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
    def points(self):
        """Whether the error is in percentage points (a hit rate)."""
        return self.field == HIT_RATE

    @property
    def error(self):
        """Relative error, or for a hit rate the difference in points."""
        if self.points:
            return self.simulated - self.measured
        if not self.measured:
            return None
        return (self.simulated - self.measured) / self.measured

    def within(self, tolerance):
        return abs(self.error) <= (HIT_TOLERANCE if self.points
                                   else tolerance)

    def format_error(self):
        if self.error is None:
            return '-'
        return ('%+.1f pt' if self.points else '%+.1f%%') % (
            self.error if self.points else 100 * self.error)


@dataclasses.dataclass
class Validation:
    cells: list
    tolerance: float = TOLERANCE
    calibration: object = None
    simulated: dict = None
    #: ``{arm: (measured, simulated)}`` of :func:`copies`.
    copies: dict = None

    @property
    def judged(self):
        return [cell for cell in self.cells if cell.judged]

    @property
    def passed(self):
        return bool(self.judged) and all(
            cell.within(self.tolerance) for cell in self.judged)

    @property
    def worst(self):
        """The judged cell with the largest error for its tolerance."""
        return max(self.judged, key=lambda cell: abs(cell.error) / (
            HIT_TOLERANCE if cell.points else self.tolerance), default=None)

    def format(self):
        lines = ['%-20s %-24s %10s %10s %9s' % (
            'arm', 'of', 'measured', 'simulated', 'error')]
        for cell in self.cells:
            of = cell.field if cell.field.startswith((MEDIAN, HIT_RATE)) \
                else 'mean ' + cell.field
            lines.append('%-20s %-24s %10.2f %10.2f %9s%s' % (
                cell.arm, of, cell.measured, cell.simulated,
                cell.format_error(),
                '' if cell.judged else '  (not judged)'))
        worst = self.worst
        lines.append('validation %s: %d judged cells, worst %s; tolerance '
                     '%.0f %% (hit rates %.0f points)' % (
                         'PASSED' if self.passed else 'FAILED',
                         len(self.judged),
                         '-' if worst is None else '%s %s %s' % (
                             worst.arm, worst.field, worst.format_error()),
                         100 * self.tolerance, HIT_TOLERANCE))
        if self.copies:
            lines.append('full volume copies (not judged): a run, mean '
                         'seconds, mean other copies in flight')
            for arm, pair in sorted(self.copies.items()):
                lines.append('%-20s %s' % (arm, '   '.join(
                    '%s %4.1f %6.2f s %5.2f' % ((what,) + figures)
                    for what, figures in zip(('measured', 'simulated'),
                                             pair))))
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
            cells.append(Cell(arm, field, value,
                              theirs[field]['mean'],
                              value > 0 and (field == 'total' or
                                             value >= JUDGED_SHARE * total)))
        pooled = arms_mod.POOL in results_mod.mechanisms(measured)[arm]
        cells.append(Cell(arm, MEDIAN, ours['overhead']['p50'],
                          theirs['overhead']['p50'],
                          ours['overhead']['p50'] > 0 and not pooled))
        if pooled:
            cells.append(Cell(arm, HIT_RATE,
                              report.hit_rate_pct(measured, arm),
                              report.hit_rate_pct(simulated, arm), True))
            cells.extend(_medians_by_kind(measured, simulated, arm))
    return Validation(cells, tolerance)


def copies(results):
    """``{arm: (copies a run, mean seconds, mean others in flight)}``.

    Of the fresh VMs whose volume was a full copy of the image: its
    creation stage, from scheduled to active, and how many other copies of
    the same run overlapped it. Arms that copied nothing are left out.
    """
    runs, spans = {}, {}
    for row in results_mod.vm_rows(results):
        runs.setdefault(row['arm'], set()).add(row['run'])
        if row['pooled'] or not row['facts'].get('volume_copy'):
            continue
        events = row['events']
        spans.setdefault(row['arm'], []).append(
            (row['run'], events['scheduled'], events['active']))
    found = {}
    for arm, copied in spans.items():
        overlaps = [sum(1 for other in copied if other is not copy
                        and other[0] == copy[0] and other[1] < copy[2]
                        and other[2] > copy[1]) for copy in copied]
        found[arm] = (len(copied) / len(runs[arm]),
                      sum(end - start for _, start, end in copied)
                      / len(copied),
                      sum(overlaps) / len(copied))
    return found


def _medians_by_kind(measured, simulated, arm):
    """The median overhead of ``arm``'s hits and of its misses."""
    cells = []
    for hit, field in MEDIAN_OF.items():
        ours, theirs = ([row['overhead'] for row in results_mod.task_rows(
            results, arm) if row['hit'] == hit]
            for results in (measured, simulated))
        if ours and theirs:
            cells.append(Cell(arm, field, stats.summary(ours)['p50'],
                              stats.summary(theirs)['p50'],
                              min(len(ours), len(theirs)) >= MIN_TASKS))
    return cells


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
    # The simulated manager learns with the measured one's options.
    options = simulator.learned_options(**dict(measured.get(
        'preconditions', {}).get('pool_options') or {}))
    simulated = runner.execute(
        simrunner.SimulatedRunner(calibration, seed, prefill=prefill,
                                  pool_options=options),
        workload_mod.Workload.from_dict(measured['workload']),
        [arms_mod.Arm.from_dict(arm) for arm in measured['arms']],
        repetitions=max(repetitions, protocol['repetitions']), warmup=0,
        seed=protocol['seed'], progress=progress)
    result = compare(measured, simulated, tolerance)
    result.calibration = calibration
    result.simulated = simulated
    ours, theirs = copies(measured), copies(simulated)
    none = (0.0, 0.0, 0.0)
    result.copies = {arm: (ours.get(arm, none), theirs.get(arm, none))
                     for arm in set(ours) | set(theirs)}
    return result
