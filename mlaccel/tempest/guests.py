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

"""Processes of this host read from ``/proc``: guests of the test virt driver.

mlaccel's test virt driver runs each server's guest as a local process with
``MLACCEL_INSTANCE_UUID`` in its environment, so the tempest tests (and the
all-in-one cloud's process sweep) find a server's guest here.
"""

import os


def processes():
    """Yield ``(pid, pgid, state)`` of every live process."""
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after it.
        fields = stat[stat.rindex(')') + 2:].split()
        if fields[0] not in ('Z', 'X'):
            yield int(entry), int(fields[2]), fields[0]


def ancestors():
    """This process and its parents, which a sweep must never end."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open('/proc/%d/stat' % pid) as f:
                stat = f.read()
        except OSError:
            break
        pid = int(stat[stat.rindex(')') + 2:].split()[1])
    return pids


def with_environ(name, value):
    """Pids of live processes whose environment has ``name=value``.

    This process and its parents are left out.
    """
    entry = ('%s=%s' % (name, value)).encode()
    found = []
    spare = ancestors()
    for pid, _group, _state in processes():
        if pid in spare:
            continue
        try:
            with open('/proc/%d/environ' % pid, 'rb') as f:
                if entry in f.read().split(b'\0'):
                    found.append(pid)
        except OSError:
            continue
    return found
