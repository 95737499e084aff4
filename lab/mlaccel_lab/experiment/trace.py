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

"""Task streams shaped like a real ML cluster's: figures of a public trace.

The figures (``data/openb-2023.json``) are derived from the Alibaba PAI GPU
cluster trace of 2023, ``openb_pod_list_default.csv`` of
``alibaba/clusterdata`` (Weng et al., "Beware of Fragmentation: Scheduling
GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC
2023); the trace itself is not shipped. :func:`derive` makes them from any
file of the trace's columns, and :func:`from_trace` replays such a file's
own arrivals instead of drawing them.

Drawn streams keep what matters to warm pools: the arrivals per hour of
the day (a daily pattern), their bursts (tasks less than ``BURST_GAP``
seconds apart, drawn as groups) and each task's VMs and flavor. The trace
names no images: a stream draws them from a Zipf popularity model over
``images`` images, an assumption every run states.
"""

import bisect
import csv
import dataclasses
import json
import os
import random

DATA = os.path.join(os.path.dirname(__file__), 'data', 'openb-2023.json')
CITATION = ('Alibaba PAI GPU cluster trace 2023 (openb_pod_list_default, '
            'alibaba/clusterdata; Weng et al., USENIX ATC 2023)')
#: Tasks created less than this many seconds apart form one burst.
BURST_GAP = 30.0
DAY = 86400.0
#: Days of the densest stretch the figures are taken from.
DENSE_DAYS = 31


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of a stream: when it arrives, its VMs, flavor and image."""

    arrival: float
    vms: int
    flavor: str
    image: str
    lifetime: float


def read_rows(path):
    with open(path, newline='') as stream:
        return list(csv.DictReader(stream))


def flavor_of(row):
    """A flavor name for the trace's (cpu, memory, gpu) shape."""
    gpus = int(row['num_gpu'])
    memory_gib = int(row['memory_mib']) / 1024
    if gpus == 0:
        return 'cpu.large'
    if memory_gib <= 16:
        return 'gpu.small'
    return 'gpu.medium' if memory_gib <= 50 else 'gpu.large'


def vms_of(row):
    """VMs of a task: one per GPU, one for a task without."""
    return max(1, int(row['num_gpu']))


def _dense(rows):
    """The rows of the densest ``DENSE_DAYS`` days, by creation time."""
    rows = sorted(rows, key=lambda r: float(r['creation_time']))
    times = [float(r['creation_time']) for r in rows]
    best, start = 0, 0.0
    for i, t in enumerate(times):
        j = bisect.bisect_right(times, t + DENSE_DAYS * DAY)
        if j - i > best:
            best, start = j - i, t
    return [r for r in rows
            if start <= float(r['creation_time']) < start + DENSE_DAYS * DAY]


def _bursts(times):
    groups = []
    for t in times:
        if groups and t - groups[-1][-1] < BURST_GAP:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def _share(counter):
    total = sum(counter.values())
    return {str(k): v / total for k, v in sorted(counter.items())}


def _quantiles(values, count=20):
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, int(q * len(ordered) / count))]
            for q in range(count + 1)]


def derive(rows):
    """The figures a stream is drawn from, of the trace's ``rows``."""
    rows = _dense(rows)
    times = [float(r['creation_time']) for r in rows]
    bursts = _bursts(times)
    sizes, flavors, vms = {}, {}, {}
    for group in bursts:
        sizes[len(group)] = sizes.get(len(group), 0) + 1
    for row in rows:
        flavors[flavor_of(row)] = flavors.get(flavor_of(row), 0) + 1
        vms[vms_of(row)] = vms.get(vms_of(row), 0) + 1
    per_hour = [0] * 24
    for group in bursts:
        per_hour[int((group[0] % DAY) // 3600)] += 1
    gaps = [b - a for group in bursts for a, b in zip(group, group[1:])]
    lifetimes = [float(r['deletion_time']) - float(r['creation_time'])
                 for r in rows if r['deletion_time']]
    return {
        'source': CITATION,
        'days': DENSE_DAYS,
        'tasks': len(rows),
        'bursts_per_hour_of_day': [n / DENSE_DAYS for n in per_hour],
        'burst_size_share': _share(sizes),
        'gap_in_burst_quantiles_s': _quantiles(gaps or [0.0]),
        'flavor_share': _share(flavors),
        'vms_share': _share(vms),
        'lifetime_quantiles_s': _quantiles(lifetimes or [0.0]),
    }


def load(path=DATA):
    with open(path) as stream:
        return json.load(stream)


def _pick(rng, share):
    names, weights = zip(*share.items())
    return rng.choices(names, weights)[0]


def _from_quantiles(rng, quantiles):
    """A value drawn by interpolating between the shipped quantiles."""
    position = rng.random() * (len(quantiles) - 1)
    i = int(position)
    if i >= len(quantiles) - 1:
        return quantiles[-1]
    low, high = quantiles[i], quantiles[i + 1]
    return low + (high - low) * (position - i)


def zipf_images(count, exponent=1.0):
    """``{image name: share}`` of a Zipf popularity model."""
    weights = [1.0 / (rank ** exponent) for rank in range(1, count + 1)]
    total = sum(weights)
    return {'image-%d' % rank: w / total
            for rank, w in enumerate(weights, 1)}


def draw(figures, days, seed, images, scale=1.0):
    """A stream of ``days`` days drawn from ``figures``, sorted by arrival.

    :param images: ``{image: share}`` (see :func:`zipf_images`).
    :param scale: arrivals per hour are multiplied by it.
    """
    rng = random.Random(seed)
    tasks = []
    for hour in range(int(days * 24)):
        rate = figures['bursts_per_hour_of_day'][hour % 24] * scale
        t = hour * 3600.0
        while True:
            t += rng.expovariate(rate / 3600.0) if rate > 0 else 3600.0
            if t >= (hour + 1) * 3600.0:
                break
            at = t
            for _ in range(int(_pick(rng, figures['burst_size_share']))):
                tasks.append(Task(
                    at, int(_pick(rng, figures['vms_share'])),
                    _pick(rng, figures['flavor_share']),
                    _pick(rng, images),
                    _from_quantiles(rng, figures['lifetime_quantiles_s'])))
                at += _from_quantiles(rng, figures['gap_in_burst_quantiles_s'])
    return sorted(tasks, key=lambda task: task.arrival)


def from_trace(rows, seed, images, days=None):
    """The trace's own tasks from its densest stretch, from time 0.

    Only the images are drawn (the trace names none).
    """
    rng = random.Random(seed)
    rows = _dense(rows)
    start = float(rows[0]['creation_time']) if rows else 0.0
    start -= start % DAY   # keep the time of day
    tasks = []
    for row in rows:
        arrival = float(row['creation_time']) - start
        if days is not None and arrival >= days * DAY:
            break
        lifetime = (float(row['deletion_time']) - float(row['creation_time'])
                    if row['deletion_time'] else 0.0)
        tasks.append(Task(arrival, vms_of(row), flavor_of(row),
                          _pick(rng, images), lifetime))
    return tasks
