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

An arm is data, an :class:`Arm`: a name and the set of mechanisms on.
*stock* has none (mlaccel absent from nova.conf and cinder.conf, no agent,
no pool, the task started cold by the guest's user-data, the client
polling); *mlaccel* has all. The ablations turn each mechanism on alone
(``only-<mechanism>``) and leave each out (``without-<mechanism>``).
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
    POOL: 'warm pools sized by Little\'s law',
}


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    mechanisms: frozenset

    def __post_init__(self):
        unknown = set(self.mechanisms) - set(MECHANISMS)
        if unknown:
            raise ValueError('unknown mechanism(s) %s; known: %s' % (
                ', '.join(sorted(unknown)), ', '.join(MECHANISMS)))
        object.__setattr__(self, 'mechanisms', frozenset(self.mechanisms))

    def on(self, mechanism):
        if mechanism not in MECHANISMS:
            raise ValueError('unknown mechanism %r' % (mechanism,))
        return mechanism in self.mechanisms

    def to_dict(self):
        return {'name': self.name, 'mechanisms': sorted(
            self.mechanisms, key=MECHANISMS.index)}

    @classmethod
    def from_dict(cls, data):
        return cls(data['name'], frozenset(data['mechanisms']))


STOCK = Arm('stock', frozenset())
MLACCEL = Arm('mlaccel', frozenset(MECHANISMS))


def only(mechanism):
    return Arm('only-' + mechanism, frozenset([mechanism]))


def without(mechanism):
    return Arm('without-' + mechanism,
               frozenset(MECHANISMS) - {mechanism})


def main_arms():
    """Stock and mlaccel: the main comparison."""
    return [STOCK, MLACCEL]


def ablation_arms():
    """Stock, mlaccel, each mechanism alone and each left out."""
    return main_arms() + [only(m) for m in MECHANISMS] \
        + [without(m) for m in MECHANISMS]


def by_name(names):
    """The arms named, from :func:`ablation_arms`; ``ValueError`` if not."""
    known = {arm.name: arm for arm in ablation_arms()}
    missing = [name for name in names if name not in known]
    if missing:
        raise ValueError('unknown arm(s) %s; known: %s' % (
            ', '.join(missing), ', '.join(known)))
    return [known[name] for name in names]
