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

"""The arms of the experiment: which of mlaccel's mechanisms each turns on.

An arm is data, an :class:`Arm`: a name, the set of mechanisms on, and
the stock settings it turns on (:data:`TUNINGS`). *stock* has none
(mlaccel absent from nova.conf and cinder.conf, no agent, no pool, the
task started cold by the guest's user-data, the client polling);
*tuned-stock* is stock with what an operator can turn on without mlaccel;
*mlaccel* has every mechanism, its pools learned from the launches it
sees. The ablations turn each mechanism on alone (``only-<mechanism>``)
and leave each out (``without-<mechanism>``); *without-pool* is the
paper's mechanisms, the figure to set beside its 7.66 %.
"""

import dataclasses

#: Scheduler plugins: BuildSlotFilter and LifecycleWeigher.
SCHEDULER = 'scheduler'
#: The compute-node agent: hot-image pre-fetch and build pacing.
AGENT = 'agent'
#: Cinder mirror volumes: a volume cloned from the image's golden volume.
MIRROR = 'mirror'
#: mlaccel-taskd preloading the task and pushing its readiness.
TASKD = 'taskd'
#: Warm pools of VMs with warm daemons.
POOL = 'pool'
MECHANISMS = (SCHEDULER, AGENT, MIRROR, TASKD, POOL)

DESCRIPTIONS = {
    SCHEDULER: 'scheduler plugins (build-slot filter, life-cycle weigher)',
    AGENT: 'agent pre-fetch of hot images and build pacing',
    MIRROR: 'Cinder mirror volumes (clone, not copy)',
    TASKD: 'warm task daemon and push readiness',
    POOL: 'warm pools learned from the demand',
}

#: Stock Cinder's own image-volume cache (``image_volume_cache_enabled``
#: with its internal tenant): a volume from a cached image is a clone.
CINDER_IMAGE_CACHE = 'cinder-image-cache'
#: Stock settings an arm may turn on, with what each does.
TUNINGS = {CINDER_IMAGE_CACHE: 'Cinder\'s built-in image-volume cache'}


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    mechanisms: frozenset
    tunings: frozenset = frozenset()

    def __post_init__(self):
        for kind, found, known in (('mechanism', self.mechanisms, MECHANISMS),
                                   ('tuning', self.tunings, tuple(TUNINGS))):
            unknown = set(found) - set(known)
            if unknown:
                raise ValueError('unknown %s(s) %s; known: %s' % (
                    kind, ', '.join(sorted(unknown)), ', '.join(known)))
        object.__setattr__(self, 'mechanisms', frozenset(self.mechanisms))
        object.__setattr__(self, 'tunings', frozenset(self.tunings))

    def on(self, mechanism):
        if mechanism not in MECHANISMS:
            raise ValueError('unknown mechanism %r' % (mechanism,))
        return mechanism in self.mechanisms

    def tuned(self, tuning):
        return tuning in self.tunings

    def to_dict(self):
        return {'name': self.name, 'mechanisms': sorted(
            self.mechanisms, key=MECHANISMS.index),
            'tunings': sorted(self.tunings)}

    @classmethod
    def from_dict(cls, data):
        return cls(data['name'], frozenset(data['mechanisms']),
                   frozenset(data.get('tunings', ())))


STOCK = Arm('stock', frozenset())
TUNED_STOCK = Arm('tuned-stock', frozenset(), frozenset(TUNINGS))
MLACCEL = Arm('mlaccel', frozenset(MECHANISMS))


def only(mechanism):
    return Arm('only-' + mechanism, frozenset([mechanism]))


def without(mechanism):
    return Arm('without-' + mechanism,
               frozenset(MECHANISMS) - {mechanism})


def main_arms():
    """Stock, tuned stock, the paper's mechanisms (no pools), mlaccel."""
    return [STOCK, TUNED_STOCK, without(POOL), MLACCEL]


def ablation_arms():
    """The main arms, each mechanism alone and each left out."""
    return main_arms() + [only(m) for m in MECHANISMS] \
        + [without(m) for m in MECHANISMS if m != POOL]


def by_name(names):
    """The arms named, from :func:`ablation_arms`; ``ValueError`` if not."""
    known = {arm.name: arm for arm in ablation_arms()}
    missing = [name for name in names if name not in known]
    if missing:
        raise ValueError('unknown arm(s) %s; known: %s' % (
            ', '.join(missing), ', '.join(known)))
    return [known[name] for name in names]
