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

"""The simulator's stage costs, fitted from an experiment's records.

The calibration input is an experiment's results JSON
(:mod:`mlaccel_lab.experiment.results`): launch records whose VMs carry
``facts``. From the kept runs' succeeded VMs:

``schedule_seconds``
    median over launches of the scheduling stage of the first fresh VM
    scheduled (the others queue behind it), ``stock`` in arms without the
    scheduler plugins, ``plugins`` in arms with them.

``build_seconds``, ``download_bandwidth``
    least squares over those image-backed VMs of
    ``creation = build + glance_bytes / bandwidth`` (cache hits have
    ``glance_bytes`` 0, so the images' sizes and the hits fix both).
``volume_copy_bandwidth``
    those volume-backed VMs whose volume was a full copy: their images' bytes
    over their creation time beyond ``build_seconds``.
``clone_seconds``
    median creation beyond ``build_seconds`` of cloned volumes.
``cold_start_seconds``
    median buffering of fresh VMs in arms without taskd (the task started
    by user-data), less ``guest_boot_seconds``.
``preload_seconds``
    fresh VMs with taskd: median time from ``active`` to their daemon's
    readiness push (``observed.ready_received``), less the guest's boot.
``warm_start_seconds``
    median buffering of VMs claimed from a warm pool (claim, submit, fork
    to first step); without pooled VMs, taskd VMs' buffering after the
    push.
The creation costs are first estimated as below, then *refined*: VMs
that were created at the same time queued for downloads and shared
bandwidth, which the estimates take for slowness. The refinement (a
multiplicative coordinate search) changes them until the simulator,
running the same arms of the same workload, gives the mean creation
measured for each arm, image, boot kind and transfer (whether the VM
downloaded or copied its image). Validation
(:mod:`mlaccel_lab.experiment.validation`) then compares every stage of
every arm, not only creation.

``guest_boot_seconds``
    0 unless the VMs' observations carry ``guest_started`` (the test
    hypervisor starts the guest process at spawn, so it is not separable).
``step_seconds``
    median running stage over the task's steps.

``sources`` says, for each, how many VMs gave it, or that it was not
measured and which stated default stands in. A calibration may also be
written by hand as a JSON or YAML file of these fields
(:data:`mlaccel_lab.experiment.schema.CALIBRATION`).
"""

import dataclasses

import numpy

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import simulator
from mlaccel_lab.experiment import workload as workload_mod


class CalibrationError(ValueError):
    """The records cannot give a cost the simulator needs."""


@dataclasses.dataclass
class Calibration:
    """Stage costs (seconds, bytes per second) and the cluster's size."""

    schedule_seconds: dict
    build_seconds: float
    download_bandwidth: float
    volume_copy_bandwidth: float
    clone_seconds: float
    guest_boot_seconds: float
    cold_start_seconds: float
    preload_seconds: float
    warm_start_seconds: float
    step_seconds: float
    hosts: int
    host_slots: int = 64
    #: nova-compute's max_concurrent_builds.
    build_limit: int = 10
    #: The build limit the agent publishes (its initial one by default).
    pacing_limit: int = 4
    #: Glance's aggregate bandwidth (None: one host's download's).
    glance_bandwidth: float = None
    volume_backends: int = 1
    scheduler_workers: int = 1
    #: Little's-law pools of ``prefill`` runs only (learned pools take the
    #: ``[mlaccel_pool]`` options): seconds between sizings, demand
    #: window, margin, most members.
    pool_interval: float = 10.0
    pool_window: float = 300.0
    pool_margin: float = 0.5
    pool_max: int = 8
    #: Seconds from a task's arrival to its first request, by launch path
    #: (:func:`launch_path`): the launch's own calls before the life
    #: cycle's first stage. None: none.
    waiting_seconds: dict = None
    #: Cores of the one machine every volume copy, cold start and preload
    #: shares (the all-in-one cloud), less what its other services use.
    #: None: each host's guests and each backend have cores of their own.
    cpu_cores: float = None
    #: Cinder's CPU-seconds per GiB it copies from Glance into a volume.
    copy_cpu_seconds_per_gib: float = None
    #: The mirror-volume driver's fill of a golden volume: a raw image
    #: streamed straight into it, one pass where Cinder's copy makes two.
    #: Bytes per second (None: ``volume_copy_bandwidth``) and CPU-seconds
    #: per GiB (None: ``copy_cpu_seconds_per_gib``).
    fill_bandwidth: float = None
    fill_cpu_seconds_per_gib: float = None
    sources: dict = dataclasses.field(default_factory=dict)
    version: int = 1

    @property
    def glance(self):
        return self.glance_bandwidth or self.download_bandwidth

    @property
    def fill(self):
        """``(bytes per second, CPU-seconds per GiB)`` of a golden fill."""
        return (self.fill_bandwidth or self.volume_copy_bandwidth,
                self.copy_cpu_seconds_per_gib
                if self.fill_cpu_seconds_per_gib is None
                else self.fill_cpu_seconds_per_gib)

    def waiting(self, arm):
        """The waiting of a task of ``arm`` (0 when not calibrated)."""
        return (self.waiting_seconds or {}).get(
            launch_path(arm.mechanisms), 0.0)

    def to_dict(self):
        return {key: value for key, value in dataclasses.asdict(self).items()
                if value is not None}

    @classmethod
    def from_dict(cls, data, name='calibration'):
        schema.check(data, schema.CALIBRATION, name)
        return cls(**data)


#: Launch paths: a stock launch with the task in user-data, mlaccel's
#: launcher (the task daemon or warm pools).
COLD, LAUNCHER = 'cold', 'launcher'


def launch_path(mechanisms):
    """``LAUNCHER`` with the task daemon or pools among ``mechanisms``."""
    return LAUNCHER if {arms.TASKD, arms.POOL} & set(mechanisms) else COLD


def _fit_waiting(results, sources):
    """Median waiting of each launch path's tasks, from the task rows."""
    waits = {}
    for arm, mechanisms in results_mod.mechanisms(results).items():
        waits.setdefault(launch_path(mechanisms), []).extend(
            row['waiting'] for row in results_mod.task_rows(results, arm))
    found = {}
    for path, values in sorted(waits.items()):
        median = _median(values)
        if median is not None:
            found[path] = median[0]
            sources['waiting_seconds.' + path] = 'median of %d tasks' \
                % median[1]
    return found or None


def _run_seconds(run):
    """From a run's first arrival to its last task's end; None: unknown."""
    spans = [(rec['arrival'], rec['arrival'] + results_mod.waiting(rec)
              + rec['timeline']['total']) for rec in run['records']
             if rec.get('arrival') is not None
             and rec['timeline'].get('total') is not None]
    if not spans:
        return None
    return max(end for _, end in spans) - min(start for start, _ in spans)


def _gib_moved(run, mirror, hot):
    """``(GiB Cinder copied, GiB the mirror filled)`` in a run.

    Copies are the fresh VMs' copied volumes; with mirror volumes, each
    image a fresh VM's volume was made of was filled once (the reset
    emptied the cache), but the hot ones, filled before the run.
    """
    copied, filled = 0, {}
    for rec in run['records']:
        for vm in rec['vms']:
            facts = vm.get('facts') or {}
            if vm.get('pool') is not None or \
                    facts.get('boot') != workload_mod.VOLUME:
                continue
            if facts.get('volume_copy'):
                copied += facts['image_bytes']
            elif mirror and facts.get('image') not in hot:
                filled[facts.get('image')] = facts['image_bytes']
    return copied / simulator.GIB, sum(filled.values()) / simulator.GIB


def _fit_cpu(results, sources):
    """``(cpu_cores, copy and fill CPU-seconds per GiB)`` of a machine.

    From each kept run's CPU table (``costs['cpu_seconds']``): Cinder's
    CPU-seconds per GiB copied and per GiB the mirror filled, a least-
    squares fit over the runs of cinder-volume's CPU-seconds on the GiB of
    each (:func:`_gib_moved`); the cores left, the machine's less the mean
    use of everything else (its services, and cinder-volume's CPU the fit
    puts at nothing moved). ``(None, None, None)`` unless one all-in-one
    machine ran everything and the runs moved different volumes enough to
    tell each cost apart.
    """
    cpus = results.get('preconditions', {}).get('cpus')
    runs = results_mod.kept_runs(results)
    if results.get('runner') != 'aio' or not cpus or not runs or not all(
            results_mod.CPU_COSTS in run['costs'] for run in runs):
        sources['cpu_cores'] = 'not modelled: no CPU table of one machine'
        return None, None, None
    mechanisms = results_mod.mechanisms(results)
    hot = {image['name'] for image in results['workload']['images']
           if image.get('hot')} if 'workload' in results else set()
    moved, used_cpu = [], []
    for run in runs:
        moved.append(_gib_moved(run, arms.MIRROR in mechanisms[run['arm']],
                                hot))
        used_cpu.append(run['costs'][results_mod.CPU_COSTS].get(
            'cinder-volume', 0.0))
    filled = any(fill for _, fill in moved)
    columns = numpy.array([[1.0, copied] + ([fill] if filled else [])
                           for copied, fill in moved])
    if numpy.linalg.matrix_rank(columns) < columns.shape[1]:
        sources['cpu_cores'] = 'not modelled: the runs do not tell ' \
            'copies from the rest'
        return None, None, None
    fitted = numpy.linalg.lstsq(columns, numpy.array(used_cpu),
                                rcond=None)[0]
    intercept, slope = max(float(fitted[0]), 0.0), max(float(fitted[1]), 0.0)
    fill_slope = max(float(fitted[2]), 0.0) if filled else None
    used = []
    for run in runs:
        seconds = _run_seconds(run)
        if not seconds:
            continue
        cpu = run['costs'][results_mod.CPU_COSTS]
        other = cpu.get('total', 0.0) - cpu.get('cinder-volume', 0.0) \
            - cpu.get('guests', 0.0) + intercept
        used.append(other / seconds)
    cores = cpus - (sum(used) / len(used) if used else 0.0)
    if cores <= 0:
        sources['cpu_cores'] = 'not modelled: the services use every core'
        return None, None, None
    sources['cpu_cores'] = '%d cores less the mean use of the rest over ' \
        '%d runs' % (cpus, len(used))
    sources['copy_cpu_seconds_per_gib'] = 'least squares over %d runs ' \
        'of cinder-volume\'s CPU on the GiB copied%s' % (
            len(runs), ' and filled' if filled else '')
    if filled:
        sources['fill_cpu_seconds_per_gib'] = 'the same fit'
    return cores, slope, fill_slope


def _median(values):
    values = [v for v in values if v is not None]
    return (float(numpy.median(values)), len(values)) if values else None


def _fresh(rows):
    return [row for row in rows if not row['pooled']]


def _fit_creation(rows, sources):
    """``(build_seconds, download_bandwidth)``, first estimates.

    Least squares when the downloads' sizes tell build from transfer;
    when they cannot (one size only, or VMs that queued together hiding
    the slope), build is half the quickest creation and the bandwidth the
    median of each downloading VM's bytes over the rest of its creation.
    Either way :func:`refine` then fits both to the measured creations
    with the simulator, which models the queueing.
    """
    image = [row for row in _fresh(rows)
             if row['facts']['boot'] == workload_mod.IMAGE]
    if len(image) < 2:
        raise CalibrationError('fewer than 2 fresh image-backed VMs in the '
                               'records: cannot fit build and download')
    size = numpy.array([row['facts']['glance_bytes'] for row in image],
                       dtype=float)
    creation = numpy.array([row['durations']['creation'] for row in image])
    if not size.any():
        raise CalibrationError('no fresh image-backed VM downloaded its '
                               'image: cannot fit the download bandwidth')
    if numpy.ptp(size) > 0:
        design = numpy.column_stack([numpy.ones_like(size), size])
        (build, per_byte), *_ = numpy.linalg.lstsq(design, creation,
                                                   rcond=None)
        if per_byte > 0 and build >= 0:
            sources['build_seconds'] = sources['download_bandwidth'] = (
                'least squares over %d image-backed VMs, refined'
                % len(image))
            return float(build), float(1.0 / per_byte)
        why = 'slope %.3g s/byte, intercept %.3g s' % (per_byte, build)
    else:
        why = 'all downloaded %d bytes' % size[0]
    build = 0.5 * float(creation.min())
    bandwidth = float(numpy.median([b / max(c - build, 1e-3)
                                    for b, c in zip(size, creation) if b]))
    sources['build_seconds'] = sources['download_bandwidth'] = (
        'rough estimate from %d image-backed VMs (least squares cannot '
        'separate build from download: %s), refined' % (len(image), why))
    return build, bandwidth


def _fit_volumes(rows, build, sources):
    volume = [row for row in _fresh(rows)
              if row['facts']['boot'] == workload_mod.VOLUME]
    copies = [row for row in volume if row['facts']['volume_copy']]
    clones = [row for row in volume if row['facts']['volume_clone']
              and not row['facts']['volume_copy']]
    extra = sum(max(row['durations']['creation'] - build, 1e-6)
                for row in copies)
    if not copies:
        raise CalibrationError('no volume-backed VM whose volume was '
                               'copied: cannot fit volume_copy_bandwidth')
    bandwidth = sum(row['facts']['image_bytes'] for row in copies) / extra
    sources['volume_copy_bandwidth'] = 'bytes over time of %d copies, ' \
        'refined' % len(copies)
    clone = _median(max(row['durations']['creation'] - build, 0.0)
                    for row in clones)
    if clone is None:
        sources['clone_seconds'] = 'not measured: 0'
        return bandwidth, 0.0
    sources['clone_seconds'] = 'median of %d clones, refined' % clone[1]
    return bandwidth, clone[0]


def _fit_buffering(rows, sources):
    fresh = _fresh(rows)
    cold = [row for row in fresh if arms.TASKD not in row['mechanisms']]
    warm = [row for row in fresh if arms.TASKD in row['mechanisms']]
    boot = _median(row['observed'].get('guest_started', None)
                   and row['observed']['guest_started']
                   - row['events']['active'] for row in fresh)
    if boot is None:
        boot = (0.0, 0)
        sources['guest_boot_seconds'] = 'not separable here: 0'
    else:
        sources['guest_boot_seconds'] = 'median of %d guests' % boot[1]
    cold_start = _median(row['durations']['buffering'] - boot[0]
                         for row in cold)
    if cold_start is None:
        raise CalibrationError('no fresh VM without taskd: cannot fit '
                               'cold_start_seconds')
    sources['cold_start_seconds'] = 'median of %d VMs' % cold_start[1]
    pushed = [row for row in warm
              if row['observed'].get('ready_received') is not None]
    preload = _median(max(row['observed']['ready_received']
                          - row['events']['active'] - boot[0], 0.0)
                      for row in pushed)
    if preload is None:
        preload = cold_start
        sources['preload_seconds'] = 'not measured: cold_start_seconds'
    else:
        sources['preload_seconds'] = 'median of %d pushes' % preload[1]
    pooled = [row for row in rows if row['pooled']]
    warm_start = _median(row['durations']['buffering'] for row in pooled)
    if warm_start is not None:
        sources['warm_start_seconds'] = 'median of %d pooled VMs' \
            % warm_start[1]
    else:
        warm_start = _median(
            max(row['events']['started'] - row['observed']['ready_received'],
                0.0) for row in pushed)
        if warm_start is None:
            warm_start = (0.0, 0)
            sources['warm_start_seconds'] = 'not measured: 0'
        else:
            sources['warm_start_seconds'] = 'median of %d VMs after the ' \
                'push' % warm_start[1]
    return boot[0], cold_start[0], preload[0], warm_start[0]


def fit(results, hosts=None):
    """The :class:`Calibration` of an experiment's ``results`` dict."""
    rows = results_mod.vm_rows(results)
    if not rows:
        raise CalibrationError('no succeeded VM in the kept runs')
    sources = {}
    fresh = _fresh(rows)
    first = {}
    for row in fresh:
        known = first.get(row['launch'])
        if known is None or row['durations']['scheduling'] \
                < known['durations']['scheduling']:
            first[row['launch']] = row
    schedule = {}
    for key, with_plugins in (('stock', False), ('plugins', True)):
        found = _median(row['durations']['scheduling']
                        for row in first.values()
                        if (arms.SCHEDULER in row['mechanisms'])
                        == with_plugins)
        if found is not None:
            schedule[key] = found[0]
            sources['schedule_seconds.' + key] = 'median of %d launches\' ' \
                'first VMs' % found[1]
    if not schedule:
        raise CalibrationError('no fresh VM: cannot fit scheduling')
    for key, other in (('stock', 'plugins'), ('plugins', 'stock')):
        if key not in schedule:
            schedule[key] = schedule[other]
            sources['schedule_seconds.' + key] = 'not measured: ' + other
    build, download = _fit_creation(rows, sources)
    copy, clone = _fit_volumes(rows, build, sources)
    boot, cold, preload, warm = _fit_buffering(rows, sources)
    step = _median(row['durations']['running'] / row['steps']
                   for row in rows if row['steps'])
    if step is None:
        raise CalibrationError('no record says how many steps ran')
    sources['step_seconds'] = 'median of %d VMs' % step[1]
    if hosts is None:
        hosts = len({row['facts']['host'] for row in rows})
    cores, copy_cpu, fill_cpu = _fit_cpu(results, sources)
    return refine(Calibration(
        schedule_seconds=schedule, build_seconds=build,
        download_bandwidth=download, volume_copy_bandwidth=copy,
        clone_seconds=clone, guest_boot_seconds=boot,
        cold_start_seconds=cold, preload_seconds=preload,
        warm_start_seconds=warm, step_seconds=step[0], hosts=hosts,
        waiting_seconds=_fit_waiting(results, sources), cpu_cores=cores,
        copy_cpu_seconds_per_gib=copy_cpu, fill_cpu_seconds_per_gib=fill_cpu,
        fill_bandwidth=copy if _mirrored(results) else None,
        sources=sources), results)


def _mirrored(results):
    """Whether an arm of ``results`` ran the mirror-volume driver."""
    return any(arms.MIRROR in mechanisms for mechanisms in
               results_mod.mechanisms(results).values())


_REFINED = ('build_seconds', 'download_bandwidth', 'volume_copy_bandwidth',
            'clone_seconds')
#: Refined too when the cores are modelled: a start measured beside other
#: work holds its waits for the cores; the refinement finds it alone.
_REFINED_ON_CORES = ('cold_start_seconds', 'preload_seconds')


def _refined(calibration):
    return _REFINED + (('fill_bandwidth',) if calibration.fill_bandwidth
                       else ()) + (
        _REFINED_ON_CORES if calibration.cpu_cores else ())


def _fitted_means(rows, buffering=False):
    """The means the refinement matches, of fresh VMs.

    Mean creation per arm, image, boot kind and transfer (whether the VM
    downloaded or copied its image too, so that where VMs landed, a cache
    hit or not, does not count as a cost). With ``buffering``, also each
    arm's mean buffering.
    """
    sums = {}

    def add(key, value):
        total, count = sums.get(key, (0.0, 0))
        sums[key] = (total + value, count + 1)

    for row in rows:
        if row['pooled']:
            continue
        facts = row['facts']
        add((row['arm'], facts['image'], facts['boot'],
             facts['glance_bytes'] > 0, facts['volume_copy']),
            row['durations']['creation'])
        if buffering:
            add((row['arm'], 'buffering'), row['durations']['buffering'])
    return {key: total / count for key, (total, count) in sums.items()}


def _simulated_rows(calibration, workload, ran):
    """Fresh VMs' rows of one simulated run of each arm in ``ran``."""
    rows = []
    for arm in ran:
        cluster = simulator.Cluster(calibration, arm, workload,
                                    records=False)
        cluster.run()
        rows += [{'arm': arm.name, 'pooled': False, 'facts': facts,
                  'durations': {
                      'creation': (observed['notified']['active']
                                   - observed['notified']['scheduled']),
                      'buffering': (observed['first_step_at']
                                    - observed['notified']['active'])}}
                 for facts, observed, pool in cluster.vms if pool is None]
    return rows


def refine(calibration, results, tolerance=1.02, budget=400):
    """Tune the creation costs so the simulator's creation matches.

    Runs the simulator once for each arm on the measured workload (fresh
    VMs only: a pooled VM's creation was before its launch), and searches
    multiplicatively (factor 2, then its square roots, down to
    ``tolerance``) for the costs that minimise the squared relative errors
    of :func:`_fitted_means`. With the machine's cores modelled, the
    cold start and the preload are searched too, against each arm's mean
    buffering. A move counts
    when it lowers the loss by more than a millionth; the search stops
    after ``budget`` simulations in any case. No cost drops below a
    millisecond (or a byte per second).
    """
    workload = workload_mod.Workload.from_dict(results['workload'])
    ran = [arms.Arm.from_dict(a) for a in results['arms']]
    names = _refined(calibration)
    buffering = bool(calibration.cpu_cores)
    measured = _fitted_means(results_mod.vm_rows(results), buffering)

    def loss(candidate):
        simulated = _fitted_means(
            _simulated_rows(candidate, workload, ran), buffering)
        return sum(((simulated[key] - value) / value) ** 2
                   for key, value in measured.items()
                   if value > 0 and key in simulated)

    best = dataclasses.replace(calibration, **{
        name: max(getattr(calibration, name), 1e-3) for name in names})
    best_loss = loss(best)
    step = 2.0
    spent = 1
    while step > tolerance and spent < budget:
        improved = False
        for name in names:
            for factor in (step, 1.0 / step):
                value = max(getattr(best, name) * factor, 1e-3)
                if value == getattr(best, name):
                    continue
                trial = dataclasses.replace(best, **{name: value})
                trial_loss = loss(trial)
                spent += 1
                if trial_loss < best_loss * (1 - 1e-6):
                    best, best_loss, improved = trial, trial_loss, True
        if not improved:
            step = step ** 0.5
    for name in _REFINED_ON_CORES if buffering else ():
        best.sources[name] += ', refined on the shared cores'
    best.sources['refinement'] = '%s rms relative error %.1f %%' % (
        'creation and buffering' if buffering else 'creation',
        100.0 * (best_loss / max(len(measured), 1)) ** 0.5)
    return best


def load(path):
    """A calibration from ``path``: an experiment's results or by hand.

    :returns: ``(calibration, results)``, ``results`` ``None`` for a
        calibration file.
    """
    data = schema.read(path)
    if isinstance(data, dict) and 'runs' in data:
        results = schema.check(data, results_mod.SCHEMA, path)
        return fit(results), results
    return Calibration.from_dict(data, path), None
