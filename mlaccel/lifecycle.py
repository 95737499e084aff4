"""The four stages of a task's life and the record of when each ended.

A task VM's life is cut by five events::

    requested --scheduling--> scheduled --creation--> active
              --buffering--> started --running--> finished

``scheduled`` is when a host was chosen, ``active`` when Nova reports the VM
ACTIVE, ``started`` when the training loop takes its first step.
"""

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


class Timeline:
    """When each life-cycle event of one VM (or one task) happened.

    Times are UNIX timestamps so that records from the launcher, Nova's
    instance actions and the task daemon inside the guest can be merged.
    """

    def __init__(self, name='', **events):
        self.name = name
        self.events = {}
        for event, when in events.items():
            self.mark(event, when)

    def mark(self, event, when=None):
        """Record ``event`` at ``when`` (now by default) and return it."""
        if event not in EVENTS:
            raise ValueError('unknown life-cycle event %r; expected one of %s'
                             % (event, ', '.join(EVENTS)))
        self.events[event] = time.time() if when is None else float(when)
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
                'durations': self.durations(), 'total': self.total()}

    @classmethod
    def from_dict(cls, data):
        return cls(data.get('name', ''), **data.get('events', {}))

    @classmethod
    def span(cls, name, timelines):
        """A task's timeline from its VMs': each event at the last VM's.

        A task reaches an event when its slowest VM does, except
        ``requested``, which is the first VM's.
        """
        timelines = list(timelines)
        task = cls(name)
        for event in EVENTS:
            times = [t.events[event] for t in timelines if event in t.events]
            if times and len(times) == len(timelines):
                task.mark(event, min(times) if event == 'requested'
                          else max(times))
        return task

    def __repr__(self):
        return '<Timeline %s %s>' % (self.name, self.durations())
