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

"""The protocol: which arm runs when.

Every arm runs the same workload from the same state (the runner resets
the cloud before each run). Arms are interleaved: each repetition runs
every arm once, in an order drawn with the seed, never the order of the
repetition before it (when there are two arms or more), so that no arm
always meets a cloud another arm has just warmed. The first ``warmup``
repetitions are run and discarded; they run the workload's short warm-up
(:meth:`mlaccel_lab.experiment.workload.Workload.warmup`).
"""

import dataclasses

from mlaccel import interleave

MIN_REPETITIONS = 3


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of one arm.

    :ivar repetition: 0-based, counting the warm-up repetitions.
    :ivar position: the arm's place in its repetition's order.
    :ivar warmup: a discarded run.
    """

    repetition: int
    position: int
    arm: object
    warmup: bool

    def to_dict(self):
        return {'repetition': self.repetition, 'position': self.position,
                'arm': self.arm.name, 'warmup': self.warmup}


def schedule(arms, repetitions=MIN_REPETITIONS, warmup=1, seed=0):
    """The runs, in order: ``warmup`` then ``repetitions`` repetitions."""
    arms = list(arms)
    if not arms:
        raise ValueError('no arms to run')
    if len({arm.name for arm in arms}) != len(arms):
        raise ValueError('arm names must be unique')
    if repetitions < MIN_REPETITIONS:
        raise ValueError('at least %d repetitions are needed, got %d'
                         % (MIN_REPETITIONS, repetitions))
    if warmup < 0:
        raise ValueError('warmup must be 0 or more, got %d' % warmup)
    runs = []
    for repetition, order in enumerate(interleave.orders(
            arms, warmup + repetitions, seed)):
        runs += [Run(repetition, position, arm, repetition < warmup)
                 for position, arm in enumerate(order)]
    return runs
