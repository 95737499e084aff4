"""The life-cycle record of a launch: per VM and per task, JSON and table.

Each VM's timeline merges three clocks' observations:

- the launcher's: ``requested`` (just before the create call), the moment
  it saw the VM ACTIVE and the arrival of the daemon's readiness push;
- Nova's instance actions (:mod:`mlaccel.launcher.actions`): ``scheduled``
  and when the build finished;
- the task daemon's in the guest: the task's first training step and end.

Times from other clocks may be coarse (whole seconds) or a little skewed, so
each event is clamped to be no earlier than the one before it; the raw
observations stay in the record under ``observed``.
"""

import json
import os
import tempfile

from mlaccel import lifecycle

RECORD_VERSION = 1


def vm_timeline(name, observed):
    """A VM's :class:`~mlaccel.lifecycle.Timeline` from raw observations.

    :param observed: dict with any of ``requested``, ``scheduled``,
        ``built``, ``active_seen``, ``ready_received``, ``first_step_at``,
        ``finished_at`` (UNIX times or ``None``).
    """
    # The earliest sign of a running VM: Nova's build end, the launcher
    # seeing ACTIVE, or the guest's daemon already reporting ready.
    signs = [observed.get(k) for k in ('built', 'active_seen',
                                       'ready_received')]
    signs = [when for when in signs if when is not None]
    active = min(signs) if signs else None
    candidates = (('requested', observed.get('requested')),
                  ('scheduled', observed.get('scheduled')),
                  ('active', active),
                  ('started', observed.get('first_step_at')),
                  ('finished', observed.get('finished_at')))
    timeline = lifecycle.Timeline(name)
    floor = None
    for event, when in candidates:
        if when is None:
            continue
        when = when if floor is None else max(floor, when)
        timeline.mark(event, when)
        floor = when
    return timeline


def task_timeline(name, timelines):
    return lifecycle.Timeline.span(name, timelines)


def build(launch_id, request, vms, outcome, error=None, cleanup=None,
          limiter=None):
    """The launch record as a JSON-able dict.

    :param request: what was asked (image, flavor, count, task entry, ...).
    :param vms: list of dicts, each with ``name`` and ``observed`` (see
        :func:`vm_timeline`) and any other per-VM facts to keep.
    :param outcome: ``succeeded``, ``failed`` or ``cancelled``.
    """
    vm_records = []
    timelines = []
    for vm in vms:
        timeline = vm_timeline(vm['name'], vm.get('observed', {}))
        timelines.append(timeline)
        vm_records.append(dict(vm, timeline=timeline.to_dict()))
    task = task_timeline(launch_id, timelines)
    return {'version': RECORD_VERSION, 'launch_id': launch_id,
            'request': request, 'outcome': outcome, 'error': error,
            'timeline': task.to_dict(), 'vms': vm_records,
            'cleanup': cleanup or {}, 'limiter': limiter or {}}


def write_json(record, path):
    """Write ``record`` to ``path`` atomically (never half a file)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.record-', suffix='.json',
                               dir=directory)
    try:
        with os.fdopen(fd, 'w') as stream:
            json.dump(record, stream, indent=2, sort_keys=True)
            stream.write('\n')
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _seconds(value):
    return '-' if value is None else '%.3f' % value


def format_table(record):
    """A text table: one row per VM and one for the task."""
    columns = ('vm',) + tuple(s.value for s in lifecycle.STAGES) \
        + ('total', 'state')
    rows = []
    for vm in record['vms']:
        durations = vm['timeline']['durations']
        rows.append((vm['name'],)
                    + tuple(_seconds(durations[s.value])
                            for s in lifecycle.STAGES)
                    + (_seconds(vm['timeline']['total']),
                       vm.get('state') or '-'))
    task = record['timeline']
    rows.append(('task',)
                + tuple(_seconds(task['durations'][s.value])
                        for s in lifecycle.STAGES)
                + (_seconds(task['total']), record['outcome']))
    widths = [max(len(str(row[i])) for row in rows + [columns])
              for i in range(len(columns))]

    def line(row):
        return '  '.join(str(cell).ljust(width) if i == 0
                         else str(cell).rjust(width)
                         for i, (cell, width) in enumerate(zip(row, widths)))

    rule = '  '.join('-' * width for width in widths)
    lines = [line(columns), rule] + [line(row) for row in rows[:-1]] \
        + [rule, line(rows[-1])]
    lines.append('(seconds; launch %s)' % record['launch_id'])
    return '\n'.join(lines) + '\n'
