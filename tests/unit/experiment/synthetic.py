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

"""Experiment results built from records, by a model of their own.

Not the simulator: a closed-form account of the same life cycle for tasks
spaced so far apart that no two overlap, written separately, with seeded
noise on every cost. The simulator and its calibration are tested against
results it did not produce, in the record schema a cloud runner writes.
Warm pools are not modelled here (their members' creation overlaps the
tasks); the arms are stock and those without pools.
"""

import dataclasses
import random

from mlaccel.launcher import record
from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import protocol
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import workload as workload_mod

COSTS = {'schedule_stock': 0.05, 'schedule_plugins': 0.06, 'build': 1.0,
         'download_bandwidth': 250e6, 'copy_bandwidth': 150e6,
         'clone': 0.05, 'cold_start': 3.1, 'preload': 3.4, 'warm': 0.1,
         'step': 0.004}
ARMS = [arms_mod.STOCK, arms_mod.without(arms_mod.POOL),
        arms_mod.only(arms_mod.MIRROR), arms_mod.only(arms_mod.TASKD)]
HOSTS = ('cmp-a', 'cmp-b')
EPOCH = 1.8e9
SPACING = 100.0


class _Runner:
    kind = 'synthetic'
    measured = True


#: Steps of the model's task: long enough for its running share.
STEPS = 10000


def fixed_shape():
    """A fixed-mix workload shape (tasks and arrivals, not a stream)."""
    return workload_mod.check_shape({
        'version': 1, 'seed': 42,
        'images': [{'name': 'small', 'size_mib': 256, 'hot': True},
                   {'name': 'medium', 'size_mib': 1024},
                   {'name': 'large', 'size_mib': 2048}],
        'tasks': {'count': 4, 'vms': {'min': 1, 'max': 4},
                  'boot_from_volume': 0.75},
        'arrivals': {'duration': 30, 'bursts': [{'size': 2, 'spread': 2}]},
        'task': {'entry': 'clip', 'steps': 540, 'device_ms': 50,
                 'threads': 1}}, 'fixed mix')


def fixed_workload(seed=None):
    return workload_mod.generate(fixed_shape(), seed)


def spaced_workload(seed=None, spacing=SPACING):
    """Tasks of the default workload's images, ``spacing`` seconds apart.

    Six tasks, half of them image-backed (downloads of several sizes, so
    that build and bandwidth are identifiable), each of :data:`STEPS`
    steps: the model's own, not the shipped file's.
    """
    shape = fixed_shape()
    shape = dict(shape, tasks=dict(shape['tasks'], count=6,
                                   boot_from_volume=0.5),
                 task=dict(shape['task'], steps=STEPS))
    made = workload_mod.generate(shape, seed)
    return dataclasses.replace(made, tasks=tuple(
        dataclasses.replace(task, at=spacing * (index + 1), steps=STEPS)
        for index, task in enumerate(made.tasks)))


class _Cloud:
    def __init__(self, arm, made, costs, rng):
        self.arm = arm
        self.made = made
        self.costs = costs
        self.rng = rng
        self.cached = {host: set() for host in HOSTS}
        self.golden = set()
        self.spent = dict.fromkeys(results_mod.RUN_COSTS, 0)
        # Hot images are warm before the first task: pre-fetched by the
        # agent, golden by the mirror-volume driver's pre-warm.
        for image in made.images:
            if image.hot and arm.on(arms_mod.AGENT):
                for host in HOSTS:
                    self.cached[host].add(image.name)
                    self.spent['glance_bytes'] += image.size
            if image.hot and arm.on(arms_mod.MIRROR):
                self.golden.add(image.name)
                self.spent['glance_bytes'] += image.size
                self.spent['volume_copies'] += 1

    def noisy(self, seconds, sigma=0.04):
        return seconds * self.rng.lognormvariate(0.0, sigma)

    def hosts(self, task):
        """Where each VM goes: spread, or packed onto a cached host."""
        holding = [h for h in HOSTS if task.image in self.cached[h]]
        if self.arm.on(arms_mod.SCHEDULER) and len(holding) == 1:
            return [holding[0]] * task.vms
        start = self.rng.randrange(len(HOSTS))
        return [HOSTS[(start + i) % len(HOSTS)] for i in range(task.vms)]

    def creation(self, task, placed):
        """Seconds of each VM's creation, and its facts."""
        image = self.made.image(task.image)
        c = self.costs
        facts = [{'host': host, 'image': image.name,
                  'image_bytes': image.size, 'boot': task.boot,
                  'glance_bytes': 0, 'volume_copy': False,
                  'volume_clone': False} for host in placed]
        if task.boot == workload_mod.IMAGE:
            missing = sorted({h for h in placed
                              if image.name not in self.cached[h]})
            fetch = len(missing) * image.size / c['download_bandwidth']
            for host in missing:
                self.cached[host].add(image.name)
                self.spent['glance_bytes'] += image.size
                facts[placed.index(host)]['glance_bytes'] = image.size
            extra = [self.noisy(fetch) if h in missing else 0.0
                     for h in placed]
        elif not self.arm.on(arms_mod.MIRROR):
            copy = task.vms * image.size / c['copy_bandwidth']
            self.spent['glance_bytes'] += task.vms * image.size
            self.spent['volume_copies'] += task.vms
            for fact in facts:
                fact.update(volume_copy=True, glance_bytes=image.size)
            extra = [self.noisy(copy) for _ in placed]
        else:
            first = image.name not in self.golden
            copy = image.size / c['copy_bandwidth'] if first else 0.0
            if first:
                self.golden.add(image.name)
                self.spent['glance_bytes'] += image.size
                self.spent['volume_copies'] += 1
                facts[0].update(volume_copy=True, glance_bytes=image.size)
            for fact in facts:
                fact['volume_clone'] = True
            extra = [self.noisy(copy + c['clone']) for _ in placed]
        return [e + self.noisy(c['build']) for e in extra], facts

    def launch(self, task):
        c = self.costs
        at = EPOCH + task.at
        schedule = c['schedule_plugins' if self.arm.on(arms_mod.SCHEDULER)
                     else 'schedule_stock']
        placed = self.hosts(task)
        creation, facts = self.creation(task, placed)
        vms = []
        for index, (seconds, fact) in enumerate(zip(creation, facts)):
            scheduled = at + (index + 1) * self.noisy(schedule)
            active = scheduled + seconds
            observed = {'requested': at, 'notified': {
                'scheduled': scheduled, 'active': active}}
            if self.arm.on(arms_mod.TASKD):
                observed['ready_received'] = active + self.noisy(
                    c['preload'])
                first = observed['ready_received'] + self.noisy(c['warm'])
            else:
                first = active + self.noisy(c['cold_start'])
            observed['first_step_at'] = first
            observed['finished_at'] = first + self.noisy(
                task.steps * c['step'])
            vms.append({'name': 'vm-%d-%d' % (task.index, index),
                        'observed': observed, 'facts': fact, 'pool': None})
        request = {'image': task.image, 'count': task.vms,
                   'args': {'steps': task.steps}}
        return results_mod.annotate(record.build(
            'launch-%s-%d' % (self.arm.name, task.index), request, vms,
            'succeeded'), task)


def results(seed=0, workload_seed=None, costs=None, arms=None,
            repetitions=3, warmup=1):
    """An experiment's results dict, as a cloud runner would write it."""
    costs = dict(COSTS, **(costs or {}))
    arms = arms or ARMS
    made = spaced_workload(workload_seed)
    rng = random.Random(seed)
    out = results_mod.new(_Runner, made, arms, repetitions, warmup, seed)
    for run in protocol.schedule(arms, repetitions, warmup, seed):
        cloud = _Cloud(run.arm, made, costs, rng)
        outcome = {'records': [cloud.launch(t) for t in made.tasks],
                   'costs': cloud.spent}
        out['runs'].append(results_mod.run_entry(run, outcome, made))
    return out
