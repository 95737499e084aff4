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

"""The experiment's results: every launch record of every run, as JSON.

::

    {"version": 1, "runner": "aio", "measured": true,
     "workload": {...}, "arms": [{"name", "mechanisms"}],
     "protocol": {"repetitions", "warmup", "seed"},
     "preconditions": {...},
     "runs": [{"repetition", "position", "arm", "warmup",
               "records": [<launch record>, ...],
               "costs": {"glance_bytes", "volume_copies",
                         "pool_idle_vm_seconds",
                         "pool_member_vm_seconds"}}]}

Each launch record is :mod:`mlaccel.launcher.record`'s (version 2), with
``experiment_task`` (the workload task's index) and, on each VM, ``facts``
(:data:`VM_FACTS`): what the runner knows of its creation.

The rows the statistics use leave records out for a reason
(:func:`left_out`), and :func:`dropped` counts them.
"""

import collections
import re

from mlaccel.launcher import record as record_mod
from mlaccel import lifecycle
from mlaccel_lab.experiment import schema

VERSION = 1
STAGES = tuple(stage.value for stage in lifecycle.STAGES)
PRE_RUN = STAGES[:3]
#: The seconds of each task row (:func:`task_rows`).
ROW_FIELDS = ('waiting',) + STAGES + ('overhead', 'total')

#: Costs a runner reports per run: bytes served by Glance (downloads to
#: computes, agent pre-fetches, volume copies), full volume copies made
#: from an image, seconds warm pool members spent idle, pool members'
#: VM-seconds from their create request to their deletion or the run's end
#: (refills included).
RUN_COSTS = ('glance_bytes', 'volume_copies', 'pool_idle_vm_seconds',
             'pool_member_vm_seconds')
#: Costs added since version 1: older files lack them and still load.
ADDED_COSTS = ('pool_member_vm_seconds',)
#: A measured run's CPU seconds by part (each service, the guests, the
#: machine's total: :mod:`mlaccel_lab.testing.aio.cpu`), where a runner
#: can read them: ``{part: seconds}`` in its costs.
CPU_COSTS = 'cpu_seconds'

#: What a runner puts in each VM's ``facts``: the compute host, the image's
#: name and size, ``boot`` ('image' or 'volume'), the bytes its creation
#: downloaded from Glance (0 on a cache hit), whether its volume was a full
#: copy of the image (``volume_copy``) or a clone (``volume_clone``).
VM_FACTS = ('host', 'image', 'image_bytes', 'boot', 'glance_bytes',
            'volume_copy', 'volume_clone')

_NUMBER = {'type': 'number', 'minimum': 0}
SCHEMA = {
    'type': 'object',
    'required': ['version', 'runner', 'measured', 'workload', 'arms',
                 'protocol', 'runs'],
    'properties': {
        'version': {'const': VERSION},
        'arms': {'type': 'array', 'minItems': 1, 'items': {
            'type': 'object', 'required': ['name', 'mechanisms']}},
        'runs': {'type': 'array', 'items': {
            'type': 'object',
            'required': ['repetition', 'arm', 'warmup', 'records', 'costs'],
            'properties': {
                'records': {'type': 'array', 'items': {
                    'type': 'object',
                    'required': ['version', 'timeline', 'vms', 'outcome',
                                 'experiment_task'],
                    'properties': {
                        'version': {'const': record_mod.RECORD_VERSION},
                        'vms': {'type': 'array', 'items': {
                            'type': 'object',
                            'required': ['timeline', 'facts'],
                            'properties': {'facts': {
                                'type': 'object',
                                'required': list(VM_FACTS)}}}}}}},
                'costs': {'type': 'object',
                          'required': [k for k in RUN_COSTS
                                       if k not in ADDED_COSTS],
                          'properties': dict(
                              {k: _NUMBER for k in RUN_COSTS},
                              **{CPU_COSTS: {
                                  'type': 'object',
                                  'additionalProperties': _NUMBER}})}}}},
    },
}


def new(runner, workload, arms, repetitions, warmup, seed):
    return {'version': VERSION, 'runner': runner.kind,
            'measured': bool(runner.measured),
            'workload': workload.to_dict(),
            'arms': [arm.to_dict() for arm in arms],
            'protocol': {'repetitions': repetitions, 'warmup': warmup,
                         'seed': seed},
            'preconditions': {}, 'runs': []}


def annotate(record, task, arrival=None):
    """Mark a launch record as the run of workload task ``task``.

    :param arrival: the wall-clock time the task arrived (its launch was
        due), from which its waiting is counted.
    """
    record['experiment_task'] = task.index
    record['arrival'] = arrival
    return record


def waiting(record):
    """Seconds from the task's arrival to its first create request.

    Or to its first claim: the launcher's own work before the life cycle's
    first stage.
    """
    arrival = record.get('arrival')
    requested = record['timeline']['events'].get('requested')
    if arrival is None or requested is None:
        return 0.0
    return max(0.0, requested - arrival)


def run_entry(run, outcome, workload):
    """One run's entry; ``ValueError`` if the runner's outcome is short."""
    records = list(outcome['records'])
    indexes = sorted(r.get('experiment_task', -1) for r in records)
    if indexes != [task.index for task in workload.tasks]:
        raise ValueError('runner returned records for tasks %s, expected '
                         'one for each of the %d tasks'
                         % (indexes, len(workload.tasks)))
    given = outcome.get('costs', {})
    costs = {key: given.get(key, 0) for key in RUN_COSTS}
    if CPU_COSTS in given:
        costs[CPU_COSTS] = dict(given[CPU_COSTS])
    return dict(run.to_dict(), records=records, costs=costs)


def load(path):
    """The results in ``path``; :class:`schema.InvalidFile` if not."""
    return schema.load(path, SCHEMA)


def arm_names(results):
    return [arm['name'] for arm in results['arms']]


def mechanisms(results):
    return {arm['name']: frozenset(arm['mechanisms'])
            for arm in results['arms']}


def kept_runs(results, arm=None):
    """The runs that count: not warm-ups; of ``arm`` if given."""
    return [run for run in results['runs'] if not run['warmup']
            and (arm is None or run['arm'] == arm)]


#: An error that starts with an exception's name: ``NoValidHost: ...``.
_ERROR_KIND = re.compile(r'([A-Z][\w.]*): ')
MISSING = 'missing '


def left_out(record):
    """Why ``record`` is not in the rows, ``None`` if it is.

    Its outcome if it did not succeed (with the error's kind when the error
    names an exception: ``failed (Timeout)``), else ``missing <stage>`` for
    the first stage whose duration is unknown.
    """
    if record['outcome'] != 'succeeded':
        kind = _ERROR_KIND.match(record.get('error') or '')
        return record['outcome'] + (' (%s)' % kind.group(1) if kind else '')
    durations = record['timeline']['durations']
    for stage in STAGES:
        if durations.get(stage) is None:
            return MISSING + stage
    return None


def _records(results, arm=None):
    """``(run, record, left_out(record))`` of the kept runs' records."""
    return [(run, rec, left_out(rec)) for run in kept_runs(results, arm)
            for rec in run['records']]


def task_rows(results, arm):
    """One row per kept record (:func:`left_out`) of ``arm``'s kept runs.

    Each row: ``key`` ``(repetition, task)``, every stage's seconds,
    ``waiting`` (:func:`waiting`), ``overhead`` (waiting + scheduling +
    creation + buffering: the task's arrival to its first step),
    ``total`` (arrival to the end), ``hit`` (every VM of the task came
    from a warm pool).
    """
    rows = []
    for run, rec, why in _records(results, arm):
        if why is None:
            durations = rec['timeline']['durations']
            row = {s: durations[s] for s in STAGES}
            row['waiting'] = waiting(rec)
            row['overhead'] = row['waiting'] + sum(row[s] for s in PRE_RUN)
            row['total'] = row['waiting'] + rec['timeline']['total']
            row['key'] = (run['repetition'], rec['experiment_task'])
            row['hit'] = bool(rec['vms']) and all(
                vm.get('pool') is not None for vm in rec['vms'])
            rows.append(row)
    return rows


def dropped(results, arm):
    """``{reason: count}`` of ``arm``'s records left out of the rows."""
    return dict(collections.Counter(
        why for _, _, why in _records(results, arm) if why))


def failures(results, arm):
    """How many of ``arm``'s records did not succeed."""
    return sum(count for why, count in dropped(results, arm).items()
               if not why.startswith(MISSING))


def vm_rows(results):
    """Every VM of every kept record with its arm and facts.

    A kept record's VMs know every stage: a task reaches an event when all
    its VMs do.
    """
    arms = mechanisms(results)
    rows = []
    for run, rec, why in _records(results):
        if why is not None:
            continue
        steps = (rec.get('request') or {}).get('args', {}).get('steps')
        for vm in rec['vms']:
            timeline = vm['timeline']
            rows.append({'arm': run['arm'],
                         'run': (run['repetition'], run['arm']),
                         'launch': rec['launch_id'],
                         'mechanisms': arms[run['arm']],
                         'durations': timeline['durations'],
                         'events': timeline['events'],
                         'observed': vm.get('observed') or {},
                         'pooled': vm.get('pool') is not None,
                         'facts': vm['facts'], 'steps': steps})
    return rows


def costs(results, arm):
    """The arm's costs per kept run (means over its runs).

    ``idle_vm_seconds`` adds each VM's buffering (a VM that exists and does
    not yet run its task) to the pool members' idle time. A cost some run
    lacks (:data:`ADDED_COSTS`, older files; :data:`CPU_COSTS`, a runner
    that does not read them) is left out, and so is a CPU part some run
    lacks.
    """
    runs = kept_runs(results, arm)
    if not runs:
        return {}
    out = {}
    for key in RUN_COSTS:
        if all(key in run['costs'] for run in runs):
            out[key] = sum(run['costs'][key] for run in runs) / len(runs)
    buffering = sum(vm['timeline']['durations']['buffering'] or 0.0
                    for run in runs for rec in run['records']
                    for vm in rec['vms'])
    out['idle_vm_seconds'] = (buffering / len(runs)
                              + out['pool_idle_vm_seconds'])
    if all(CPU_COSTS in run['costs'] for run in runs):
        parts = set.intersection(*(set(run['costs'][CPU_COSTS])
                                   for run in runs))
        out[CPU_COSTS] = {part: sum(run['costs'][CPU_COSTS][part]
                                    for run in runs) / len(runs)
                          for part in sorted(parts)}
    return out
