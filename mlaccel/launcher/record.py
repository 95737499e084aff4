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

"""The life-cycle record of a launch: per VM and per task, JSON and table.

Each VM's boundaries (:data:`mlaccel.lifecycle.DEFINITIONS`) come from the
first source that has them, in this order:

============  ==============================================================
boundary      sources, best first
============  ==============================================================
requested     the launcher's clock just before the create call
scheduled     ``scheduler.select_destinations.end`` notification; the
              instance action's build start (the compute began the build:
              later than the host choice by the conductor's work)
active        ``instance.create.end`` notification; the instance action's
              build end; the launcher seeing the server ACTIVE (or its
              daemon's readiness push), precise to one poll interval
started       taskd's ``first_step_at``; the task process's start
finished      taskd's ``finished_at``
============  ==============================================================

The create action's ``start_time`` is never used: it is the API's request
time. Times from other clocks may be coarse (whole seconds) or a little
skewed, so a boundary earlier than the one before it is moved up to it and
its ``shifted`` says by how much. The raw observations stay in the record
under ``observed``:

- ``requested``, ``active_seen``, ``ready_received``: the launcher's clock;
- ``claimed``: for a VM taken from a warm pool, the launcher's clock when
  it claimed it, which is then its requested, scheduled and active time
  (scheduling and creation take no time; buffering runs from the claim to
  the first step); ``None`` for a VM created fresh;
  ``poll_interval``: seconds between its status polls;
- ``notified``: :meth:`mlaccel.nova.notifications.InstanceEvents.times`, or
  ``None`` without a notification listener;
- ``nova``: :func:`mlaccel.nova.actions.stage_times`, or ``None``;
- ``first_step_at``, ``started_at``, ``finished_at``: taskd's, in the guest.
"""

import json
import os
import tempfile

from mlaccel import lifecycle
from mlaccel.nova import notifications as nova_events

RECORD_VERSION = 2
_USEC = nova_events.PRECISION


def _candidates(observed):
    """``{event: [(time, Boundary), ...]}``, best source first."""
    claimed = observed.get('claimed')
    if claimed is not None:
        return _claimed(claimed, _candidates(dict(observed, claimed=None)))
    notified = observed.get('notified') or {}
    nova = observed.get('nova') or {}
    coarse = nova.get('precision') or 1.0
    poll = observed.get('poll_interval') or 1.0
    seen = [(when, what) for when, what in (
        (observed.get('active_seen'), 'server seen ACTIVE by polling'),
        (observed.get('ready_received'), 'readiness push received'))
        if when is not None]
    seen = [min(seen)] if seen else []
    return {
        'requested': [
            (observed.get('requested'), lifecycle.Boundary(
                lifecycle.LAUNCHER, 'create request sent', _USEC))],
        'scheduled': [
            (notified.get('scheduled'), lifecycle.Boundary(
                lifecycle.NOTIFICATION, nova_events.SCHEDULE_END, _USEC)),
            (nova.get('build_started'), lifecycle.Boundary(
                lifecycle.INSTANCE_ACTION,
                'compute__do_build_and_run_instance start', coarse))],
        'active': [
            (notified.get('active'), lifecycle.Boundary(
                lifecycle.NOTIFICATION, nova_events.CREATE_END, _USEC)),
            (nova.get('built'), lifecycle.Boundary(
                lifecycle.INSTANCE_ACTION,
                'compute__do_build_and_run_instance finish', coarse))]
        + [(when, lifecycle.Boundary(lifecycle.LAUNCHER, what, poll))
           for when, what in seen],
        'started': [
            (observed.get('first_step_at'), lifecycle.Boundary(
                lifecycle.TASKD, 'first_step', _USEC)),
            (observed.get('started_at'), lifecycle.Boundary(
                lifecycle.TASKD, 'task process started (no first step '
                'reported)', _USEC))],
        'finished': [
            (observed.get('finished_at'), lifecycle.Boundary(
                lifecycle.TASKD, 'task process ended', _USEC))],
    }


def _claimed(claimed, candidates):
    """A warm pool member's: requested, scheduled and active at its claim.

    Its server was made long before the launch; what the launch waits for
    is the claim, then the task's start: its buffering.
    """
    return dict(candidates, **{
        event: [(claimed, lifecycle.Boundary(
            lifecycle.LAUNCHER, 'claimed from a warm pool', _USEC))]
        for event in ('requested', 'scheduled', 'active')})


def _preferred():
    return {event: options[0][1] for event, options
            in _candidates({}).items()}


def fallbacks(timeline):
    """``{event: Boundary}`` of boundaries not from their defining event."""
    preferred = _preferred()
    return {event: boundary for event, boundary in
            sorted((timeline.get('boundaries') or {}).items(),
                   key=lambda item: lifecycle.EVENTS.index(item[0]))
            if (boundary['source'], boundary['event']) !=
            (preferred[event].source, preferred[event].event)}


def vm_timeline(name, observed):
    """A VM's :class:`~mlaccel.lifecycle.Timeline` from raw observations.

    :param observed: dict of raw observations (see the module's doc).
    """
    timeline = lifecycle.Timeline(name)
    floor = None
    for event, options in _candidates(observed).items():
        found = next(((when, boundary) for when, boundary in options
                      if when is not None), None)
        if found is None:
            continue
        when, boundary = found
        if floor is not None and when < floor:
            boundary.shifted = floor - when
            when = floor
        timeline.mark(event, when, boundary)
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
            'definitions': dict(lifecycle.DEFINITIONS),
            'cleanup': cleanup or {}, 'limiter': limiter or {}}


def write_json(record, path, compact=False):
    """Write ``record`` to ``path`` atomically (never half a file).

    Indented for a reader, or ``compact``: one line, written by the JSON
    encoder's C accelerator, for files of millions of records.
    """
    # json.dumps, not json.dump: only the former uses the C encoder.
    text = json.dumps(record, sort_keys=True, separators=(',', ':')) \
        if compact else json.dumps(record, sort_keys=True, indent=2)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.record-', suffix='.json',
                               dir=directory)
    try:
        with os.fdopen(fd, 'w') as stream:
            stream.write(text)
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
    for vm in record['vms']:
        for event, boundary in fallbacks(vm['timeline']).items():
            lines.append('%s: %s from %s %s (precision %g s)' % (
                vm['name'], event, boundary['source'], boundary['event'],
                boundary['precision']))
    return '\n'.join(lines) + '\n'
