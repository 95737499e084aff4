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

"""The experiment's workload: a shape from a data file, expanded by a seed.

A workload file (:data:`DEFAULT`, shipped in this package, or any file
given with ``--workload``) says what the workload looks like: its images
and their sizes, the task each VM runs, and the tasks' arrivals, in one of
two forms (schema: :data:`mlaccel_lab.experiment.schema.WORKLOAD`):

- ``stream``: an open-loop stream shaped like a real ML cluster's, drawn
  from the figures of a public trace (:mod:`mlaccel_lab.experiment.trace`)
  or replayed from a file of the trace's columns (``--trace FILE``): its
  arrivals, bursts, VMs and task lifetimes; the images drawn by a Zipf
  popularity model; time-scaled by the stated ``time_scale``.
- ``tasks`` and ``arrivals``: a fixed mix of a stated count of tasks over
  a stated span (the simulator's production workload).

:func:`generate` draws the tasks from that shape with a seed: the file's
own, or another one for a different workload of the same shape.
"""

import dataclasses
import os
import random

from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import trace as trace_mod

DEFAULT = os.path.join(os.path.dirname(__file__), 'data', 'workload.yaml')
PRODUCTION = os.path.join(os.path.dirname(__file__), 'data',
                          'production.yaml')
MIB = 1 << 20
IMAGE = 'image'
VOLUME = 'volume'
#: Most steps a task of a warm-up run takes (:meth:`Workload.warmup`).
WARMUP_STEPS = 20
#: The most days of the trace's figures a stream is drawn from.
MAX_STREAM_DAYS = 64
#: Seconds within which a pool's requests count as one peak
#: (:meth:`Workload.pool_bounds`).
PEAK_WINDOW = 10.0


@dataclasses.dataclass(frozen=True)
class Image:
    name: str
    size: int
    hot: bool = False


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of the workload: when it arrives and what it launches.

    :ivar at: seconds after the start of the arm's run.
    :ivar boot: :data:`IMAGE` (image-backed servers) or :data:`VOLUME`
        (boot from a volume made from the image).
    :ivar device_ms: the accelerator wait of each step (``--device-ms`` of
        :mod:`mlaccel.tasks.clip`).
    :ivar lifetime: seconds the task ran in the trace it was drawn from
        (``None`` for a task of a fixed mix): the running time a real task
        of its kind has, which the report sets beside the measured
        overheads.
    """

    index: int
    at: float
    image: str
    vms: int
    boot: str
    steps: int
    device_ms: float = 0.0
    lifetime: float = None

    def args(self):
        """The example task's arguments for this task, in either arm."""
        args = {'steps': self.steps, 'seed': self.index}
        if self.device_ms:
            args['device_ms'] = self.device_ms
        return args


@dataclasses.dataclass(frozen=True)
class Workload:
    shape: dict
    seed: int
    images: tuple
    tasks: tuple

    @property
    def task_spec(self):
        return self.shape['task']

    def image(self, name):
        return next(i for i in self.images if i.name == name)

    def vm_count(self):
        return sum(task.vms for task in self.tasks)

    def pool_keys(self):
        """``(image name, boot kind)`` of each pool the workload needs."""
        return sorted({(t.image, t.boot) for t in self.tasks})

    def pool_bounds(self, image, boot, window=PEAK_WINDOW):
        """``(min, max)`` members of the pool of ``image`` booted as ``boot``.

        At least the pool's peak demand, the most VMs its tasks ask for
        within ``window`` seconds, as an operator sizing for a burst would;
        at most all its VMs in the workload. A pool manager sizes the pool
        between them by Little's law.
        """
        tasks = [t for t in self.tasks if t.image == image and t.boot == boot]
        if not tasks:
            return 0, 0
        peak = max(sum(o.vms for o in tasks if t.at <= o.at <= t.at + window)
                   for t in tasks)
        return peak, sum(t.vms for t in tasks)

    def warmup(self, steps=WARMUP_STEPS):
        """The short workload of a warm-up run.

        The first task of each boot kind, arriving at once, with at most
        ``steps`` steps: every path a run takes (image download, volume
        copy, cold start or pool claim) is taken once, for the services'
        first-use costs, without the whole workload's time.
        """
        firsts = {}
        for task in self.tasks:
            firsts.setdefault(task.boot, task)
        tasks = tuple(dataclasses.replace(task, at=0.0,
                                          steps=min(task.steps, steps))
                      for task in sorted(firsts.values(),
                                         key=lambda t: t.index))
        return dataclasses.replace(self, tasks=tasks)

    def to_dict(self):
        return {'shape': self.shape, 'seed': self.seed,
                'images': [dataclasses.asdict(i) for i in self.images],
                'tasks': [dataclasses.asdict(t) for t in self.tasks]}

    @classmethod
    def from_dict(cls, data):
        return cls(data['shape'], data['seed'],
                   tuple(Image(**i) for i in data['images']),
                   tuple(Task(**t) for t in data['tasks']))


def check_shape(shape, name):
    """Schema and cross-field checks; :class:`schema.InvalidFile` if bad."""
    schema.check(shape, schema.WORKLOAD, name)
    names = [image['name'] for image in shape['images']]
    if len(set(names)) != len(names):
        raise schema.InvalidFile('%s: images: names must be unique, got %s'
                                 % (name, ', '.join(names)))
    forms = ('stream' in shape, 'tasks' in shape and 'arrivals' in shape)
    if forms[0] == forms[1] or (forms[0] and ('tasks' in shape
                                              or 'arrivals' in shape)):
        raise schema.InvalidFile(
            '%s: (top level): give either a stream, or tasks and arrivals, '
            'not both' % name)
    if forms[0]:
        return shape
    vms = shape['tasks']['vms']
    if vms['min'] > vms['max']:
        raise schema.InvalidFile('%s: tasks/vms: min %d is above max %d'
                                 % (name, vms['min'], vms['max']))
    burst = sum(b['size'] for b in shape['arrivals'].get('bursts', ()))
    if burst > shape['tasks']['count']:
        raise schema.InvalidFile(
            '%s: arrivals/bursts: %d tasks in bursts, more than the %d '
            'tasks of tasks/count' % (name, burst, shape['tasks']['count']))
    return shape


def load_shape(path=None):
    """The shape in ``path`` (the default workload's without one)."""
    path = path or DEFAULT
    return check_shape(schema.read(path), os.path.basename(path))


def _arrivals(shape, rng):
    """Sorted arrival times: each burst's together, the rest at random."""
    span = float(shape['arrivals']['duration'])
    times = []
    for burst in shape['arrivals'].get('bursts', ()):
        spread = min(float(burst.get('spread', 0.0)), span)
        start = rng.uniform(0.0, span - spread)
        times += [start + rng.uniform(0.0, spread)
                  for _ in range(burst['size'])]
    times += [rng.uniform(0.0, span)
              for _ in range(shape['tasks']['count'] - len(times))]
    return sorted(round(t, 3) for t in times)


def _apportion(weights, count):
    """Whole shares of ``count`` in proportion to ``weights``.

    Largest remainder: the shares sum to ``count`` and each is within one
    of its exact proportion.
    """
    total = float(sum(weights))
    exact = [count * w / total for w in weights]
    shares = [int(e) for e in exact]
    order = sorted(range(len(weights)), key=lambda i: shares[i] - exact[i])
    for i in order[:count - sum(shares)]:
        shares[i] += 1
    return shares


def _mix(values, weights, count, rng):
    """``count`` values in the proportions of ``weights``, shuffled."""
    mixed = [value for value, share in zip(values, _apportion(weights, count))
             for _ in range(share)]
    rng.shuffle(mixed)
    return mixed


def _vm_counts(bounds, count, rng):
    """``count`` VM counts spread evenly over ``[min, max]``, shuffled.

    The i-th is the midpoint quantile of the uniform distribution on the
    bounds, so every workload of the shape asks for the same VMs in all.
    """
    low, high = bounds['min'], bounds['max']
    counts = [low + int((i + 0.5) / count * (high - low + 1))
              for i in range(count)]
    rng.shuffle(counts)
    return counts


def _images(shape):
    return tuple(Image(i['name'], i['size_mib'] * MIB, i.get('hot', False))
                 for i in shape['images'])


def _fixed_mix(shape, images, rng):
    """The tasks of a ``tasks``/``arrivals`` shape (see :func:`generate`)."""
    count = shape['tasks']['count']
    names = _mix([i.name for i in images],
                 [i.get('weight', 1.0) for i in shape['images']], count, rng)
    volume_share = shape['tasks'].get('boot_from_volume', 0.0)
    boots = _mix([VOLUME, IMAGE], [volume_share, 1.0 - volume_share],
                 count, rng)
    vms = _vm_counts(shape['tasks']['vms'], count, rng)
    task = shape['task']
    return tuple(
        Task(index, at, names[index], vms[index], boots[index],
             task['steps'], task.get('device_ms', 0.0))
        for index, at in enumerate(_arrivals(shape, rng)))


def popularity(shape):
    """``{image name: share}``: Zipf over the images in their file order."""
    names = [i['name'] for i in shape['images']]
    shares = trace_mod.zipf_images(len(names),
                                   shape['stream'].get('zipf_exponent', 1.0))
    return dict(zip(names, shares.values()))


def _stream(shape, rng, seed, rows=None):
    """The tasks of a ``stream`` shape (see :func:`generate`).

    ``count`` consecutive tasks of the days drawn from the trace's figures
    (as many days as that takes) or of ``rows`` (a trace file's), from a
    place the seed draws, their arrivals from the first one's multiplied
    by ``time_scale``.
    """
    stream = shape['stream']
    count = stream['tasks']
    shares = popularity(shape)
    if rows is not None:
        drawn = trace_mod.from_trace(rows, seed, shares)
    else:
        figures, days = trace_mod.load(), 1
        drawn = trace_mod.draw(figures, days, seed, shares)
        while len(drawn) < count and days < MAX_STREAM_DAYS:
            days *= 2
            drawn = trace_mod.draw(figures, days, seed, shares)
    if len(drawn) < count:
        raise ValueError('the trace gives %d tasks, fewer than the %d the '
                         'stream asks for' % (len(drawn), count))
    start = rng.randrange(len(drawn) - count + 1)
    drawn = drawn[start:start + count]
    first = drawn[0].arrival
    task = shape['task']
    volume_share = stream.get('boot_from_volume', 0.0)
    # As many of each boot kind as the share says, their order drawn.
    boots = _mix([VOLUME, IMAGE], [volume_share, 1.0 - volume_share],
                 count, rng)
    return tuple(
        Task(index, round((t.arrival - first) * stream['time_scale'], 3),
             t.image, min(t.vms, stream['max_vms']), boots[index],
             task['steps'], task.get('device_ms', 0.0), t.lifetime)
        for index, t in enumerate(drawn))


def generate(shape, seed=None, trace_rows=None):
    """Draw the :class:`Workload` of ``shape`` with ``seed``.

    The same shape and seed always give the same tasks; ``seed=None``
    takes the shape's own.

    A ``stream`` shape: the seed draws a day of the trace's figures (or
    picks the images of ``trace_rows``, a trace file's rows) and the place
    in it the stream starts; the share booting from a volume is exact
    (largest remainder), which tasks they are is drawn.

    A fixed mix: the shape fixes how many tasks use each image (in
    proportion to the images' ``weight``, equal by default), how many boot
    from a volume (``boot_from_volume``), and the VM counts (spread evenly
    between the bounds); the seed draws which task gets which, and the
    arrival times. Stratified this way, two seeds give workloads of the
    same size and mix that differ in order and timing, not in how much
    there is to do.
    """
    seed = shape['seed'] if seed is None else seed
    rng = random.Random(seed)
    images = _images(shape)
    if 'stream' in shape:
        tasks = _stream(shape, rng, seed, trace_rows)
    elif trace_rows is not None:
        raise ValueError('a trace file needs a workload with a stream')
    else:
        tasks = _fixed_mix(shape, images, rng)
    return Workload(shape, seed, images, tasks)


def load(path=None, seed=None, trace_path=None):
    """:func:`generate` from the shape in ``path`` (default: shipped).

    :param trace_path: a file of the trace's columns to replay.
    """
    rows = trace_mod.read_rows(trace_path) if trace_path else None
    return generate(load_shape(path), seed, rows)
