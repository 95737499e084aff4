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
                         "pool_idle_vm_seconds"}}]}

Each launch record is :mod:`mlaccel.launcher.record`'s (version 2), with
``experiment_task`` (the workload task's index) and, on each VM, ``facts``
(:data:`VM_FACTS`): what the runner knows of its creation.
"""

from mlaccel.launcher import record as record_mod
from mlaccel import lifecycle
from mlaccel_lab.experiment import schema

VERSION = 1
STAGES = tuple(stage.value for stage in lifecycle.STAGES)
PRE_RUN = STAGES[:3]

#: Costs a runner reports per run: bytes served by Glance (downloads to
#: computes, agent pre-fetches, volume copies), full volume copies made
#: from an image, seconds warm pool members spent idle.
RUN_COSTS = ('glance_bytes', 'volume_copies', 'pool_idle_vm_seconds')

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
                'costs': {'type': 'object', 'required': list(RUN_COSTS),
                          'properties': {k: _NUMBER for k in RUN_COSTS}}}}},
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


def annotate(record, task):
    """Mark a launch record as the run of workload task ``task``."""
    record['experiment_task'] = task.index
    return record


def run_entry(run, outcome, workload):
    """One run's entry; ``ValueError`` if the runner's outcome is short."""
    records = list(outcome['records'])
    indexes = sorted(r.get('experiment_task', -1) for r in records)
    if indexes != [task.index for task in workload.tasks]:
        raise ValueError('runner returned records for tasks %s, expected '
                         'one for each of the %d tasks'
                         % (indexes, len(workload.tasks)))
    costs = {key: outcome.get('costs', {}).get(key, 0) for key in RUN_COSTS}
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


def task_rows(results, arm):
    """One row per succeeded task of ``arm``'s kept runs.

    Each row: ``key`` ``(repetition, task)``, every stage's seconds,
    ``overhead`` (scheduling + creation + buffering: request to first
    step), ``total``.
    """
    rows = []
    for run in kept_runs(results, arm):
        for rec in run['records']:
            if rec['outcome'] != 'succeeded':
                continue
            durations = rec['timeline']['durations']
            if any(durations.get(s) is None for s in STAGES):
                continue
            row = {s: durations[s] for s in STAGES}
            row['overhead'] = sum(row[s] for s in PRE_RUN)
            row['total'] = rec['timeline']['total']
            row['key'] = (run['repetition'], rec['experiment_task'])
            rows.append(row)
    return rows


def failures(results, arm):
    return sum(1 for run in kept_runs(results, arm)
               for rec in run['records'] if rec['outcome'] != 'succeeded')


def vm_rows(results):
    """Every VM of every kept, succeeded launch with its arm and facts."""
    arms = mechanisms(results)
    rows = []
    for run in kept_runs(results):
        for rec in run['records']:
            if rec['outcome'] != 'succeeded':
                continue
            steps = (rec.get('request') or {}).get('args', {}).get('steps')
            for vm in rec['vms']:
                timeline = vm['timeline']
                if any(timeline['durations'].get(s) is None
                       for s in STAGES):
                    continue
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
    not yet run its task) to the pool members' idle time.
    """
    runs = kept_runs(results, arm)
    if not runs:
        return {}
    out = {}
    for key in RUN_COSTS:
        out[key] = sum(run['costs'][key] for run in runs) / len(runs)
    buffering = sum(vm['timeline']['durations']['buffering'] or 0.0
                    for run in runs for rec in run['records']
                    for vm in rec['vms'])
    out['idle_vm_seconds'] = (buffering / len(runs)
                              + out['pool_idle_vm_seconds'])
    return out
