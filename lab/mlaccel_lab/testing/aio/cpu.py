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

"""CPU seconds the cloud's parts have used, read from the kernel.

On the all-in-one cloud every part shares the machine's cores: the
services, and the guests the test virt driver runs as processes. What one
part uses, another waits for. :func:`sample` reads each part's CPU seconds
so far; :func:`used` subtracts two samples.

- A service is its process group (:mod:`procs` starts each in a session of
  its own): the service and every child it forks, with what they reaped.
- ``guests``: the processes of every guest (each in a session of its own,
  started by a compute) and what a compute reaped, the guests that ended
  (and any command the compute ran itself).
- ``total``: the machine's busy time (user, nice, system, interrupts,
  steal), whatever ran. It also holds what no part accounts for: the
  caller itself, the kernel's threads, a process reaped outside the cloud.

A service restarted between two samples loses what its old processes used:
its share is then counted from its restart.
"""

import dataclasses
import os

import psutil

from mlaccel_lab.testing.aio import procs

GUESTS = 'guests'
TOTAL = 'total'
#: Services whose reaped children are guests, by name prefix.
COMPUTE = 'nova-compute'
#: How far up a guest's parents are followed to find its compute.
_DEPTH = 8


@dataclasses.dataclass
class Sample:
    """CPU seconds used so far, by part, and each service's pid then."""

    seconds: dict
    pids: dict


def sample(lay):
    """The :class:`Sample` of each service, the guests and the total now."""
    leaders = {}
    for name in procs.recorded(lay):
        pid = procs.pid(lay, name)
        if pid is not None:
            leaders[pid] = name
    computes = {pid for pid, name in leaders.items()
                if name.startswith(COMPUTE)}
    used = dict.fromkeys(leaders.values(), 0.0)
    used[GUESTS] = 0.0
    parents = {}
    found = []
    for proc in psutil.process_iter(['ppid', 'cpu_times']):
        times = proc.info['cpu_times']
        if times is None:
            continue
        parents[proc.pid] = proc.info['ppid']
        found.append((proc.pid, times))
    for pid, times in found:
        own = times.user + times.system
        reaped = times.children_user + times.children_system
        try:
            group = os.getpgid(pid)
        except OSError:
            continue   # ended meanwhile
        if group in leaders:
            used[leaders[group]] += own
            used[GUESTS if pid in computes else leaders[group]] += reaped
        elif _started_by(pid, computes, parents):
            used[GUESTS] += own + reaped
    busy = psutil.cpu_times()
    used[TOTAL] = sum(getattr(busy, field, 0.0) for field in (
        'user', 'nice', 'system', 'irq', 'softirq', 'steal'))
    return Sample(used, {name: pid for pid, name in leaders.items()})


def _started_by(pid, computes, parents):
    for _ in range(_DEPTH):
        pid = parents.get(pid)
        if pid is None or pid <= 1:
            return False
        if pid in computes:
            return True
    return False


def used(before, after):
    """``{part: CPU seconds}`` between two :class:`Sample` s.

    A service started or restarted in between counts from its start.
    """
    out = {}
    for part, seconds in after.seconds.items():
        pid = after.pids.get(part)
        if pid is not None and before.pids.get(part) != pid:
            out[part] = seconds
        else:
            out[part] = max(0.0, seconds - before.seconds.get(part, 0.0))
    return out
