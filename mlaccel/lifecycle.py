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

"""The four stages of a task's life and the record of when each ended.

A task VM's life is cut by five boundaries::

    requested --scheduling--> scheduled --creation--> active
              --buffering--> started --running--> finished

Each boundary is the moment of one event, taken where that event happens
(:data:`DEFINITIONS`); stage N runs from boundary N to boundary N + 1, so
the stages of a VM add up to its total, with no gap and no overlap. A
boundary read from a less precise source (a fallback) says so in its
:class:`Boundary`: which source, which event, and its precision.
"""

import dataclasses
import enum
import time


class Stage(str, enum.Enum):
    SCHEDULING = 'scheduling'
    CREATION = 'creation'
    BUFFERING = 'buffering'
    RUNNING = 'running'


#: Events in life order; stage N runs from event N to event N + 1.
EVENTS = ('requested', 'scheduled', 'active', 'started', 'finished')
STAGES = tuple(Stage)

#: The exact definition of each boundary, from its preferred source.
DEFINITIONS = {
    'requested': 'the launcher\'s clock just before it sends the server\'s '
                 'create request to Nova\'s API',
    'scheduled': 'nova-scheduler has chosen a host: the timestamp of the '
                 'first scheduler.select_destinations.end notification for '
                 'the instance (re-schedules count as creation)',
    'active': 'the compute has built the instance and saved it ACTIVE: the '
              'timestamp of its last instance.create.end notification, '
              'sent right after that save',
    'started': 'the task\'s training loop takes its first step: taskd\'s '
               'first_step_at, stamped in the guest by '
               'mlaccel.tasks.report_first_step()',
    'finished': 'the task\'s process has ended: taskd\'s finished_at',
}

#: Where a boundary's time came from.
LAUNCHER = 'launcher'
NOTIFICATION = 'nova-notification'
INSTANCE_ACTION = 'nova-instance-action'
TASKD = 'taskd'
SOURCES = (LAUNCHER, NOTIFICATION, INSTANCE_ACTION, TASKD)


@dataclasses.dataclass
class Boundary:
    """How one boundary's time is known.

    :ivar source: one of :data:`SOURCES`.
    :ivar event: the event that gave the time, in the source's own terms
        (``scheduler.select_destinations.end``, ``first_step``...).
    :ivar precision: seconds by which the time may differ from the
        boundary as defined: 1e-6 for a microsecond timestamp of the event
        itself, 1.0 for a database time cut to whole seconds, more for a
        stand-in event (say so in ``event``).
    :ivar shifted: seconds the time was moved later so as not to precede
        the boundary before it (coarse or skewed clocks); 0 normally.
    """

    source: str
    event: str
    precision: float
    shifted: float = 0.0

    def to_dict(self):
        return dataclasses.asdict(self)


class Timeline:
    """When each life-cycle event of one VM (or one task) happened.

    Times are UNIX timestamps so that records from the launcher, Nova and
    the task daemon inside the guest can be merged. ``boundaries`` holds a
    :class:`Boundary` for every event whose source is known.
    """

    def __init__(self, name='', **events):
        self.name = name
        self.events = {}
        self.boundaries = {}
        for event, when in events.items():
            self.mark(event, when)

    def mark(self, event, when=None, boundary=None):
        """Record ``event`` at ``when`` (now by default) and return it.

        :param boundary: the :class:`Boundary` saying how it is known.
        """
        if event not in EVENTS:
            raise ValueError('unknown life-cycle event %r; expected one of %s'
                             % (event, ', '.join(EVENTS)))
        self.events[event] = time.time() if when is None else float(when)
        if boundary is not None:
            self.boundaries[event] = boundary
        else:
            self.boundaries.pop(event, None)
        return self.events[event]

    def duration(self, stage):
        """Seconds spent in ``stage``, or ``None`` if not both ends known."""
        index = STAGES.index(Stage(stage))
        start = self.events.get(EVENTS[index])
        end = self.events.get(EVENTS[index + 1])
        if start is None or end is None:
            return None
        return end - start

    def durations(self):
        return {stage.value: self.duration(stage) for stage in STAGES}

    def total(self):
        """Seconds from request to the last recorded event."""
        if 'requested' not in self.events:
            return None
        return max(self.events.values()) - self.events['requested']

    def to_dict(self):
        return {'name': self.name, 'events': dict(self.events),
                'boundaries': {event: boundary.to_dict() for event, boundary
                               in self.boundaries.items()},
                'durations': self.durations(), 'total': self.total()}

    @classmethod
    def from_dict(cls, data):
        timeline = cls(data.get('name', ''))
        boundaries = data.get('boundaries') or {}
        for event, when in (data.get('events') or {}).items():
            known = boundaries.get(event)
            timeline.mark(event, when,
                          Boundary(**known) if known else None)
        return timeline

    @classmethod
    def span(cls, name, timelines):
        """A task's timeline from its VMs': each event at the last VM's.

        A task reaches an event when its slowest VM does, except
        ``requested``, which is the first VM's. Each event keeps the
        boundary of the VM it was taken from.
        """
        timelines = list(timelines)
        task = cls(name)
        for event in EVENTS:
            having = [t for t in timelines if event in t.events]
            if not having or len(having) != len(timelines):
                continue
            pick = min if event == 'requested' else max
            chosen = pick(having, key=lambda t: t.events[event])
            task.mark(event, chosen.events[event],
                      chosen.boundaries.get(event))
        return task

    def __repr__(self):
        return '<Timeline %s %s>' % (self.name, self.durations())
