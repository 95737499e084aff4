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

"""Which golden volumes to delete when the cache is over its limits.

Greedy-Dual-Size-Frequency: an entry's priority is ``L + hits * cost /
size``, where ``cost`` is the seconds it took to create (what a miss would
cost again) and ``L`` the cache's inflation, raised to the priority of every
evicted entry, so entries not used for a long time age out even if they were
once popular. The lowest priority goes first; busy entries (being cloned,
being filled, pinned) never go.
"""

import threading


class GDSF:
    """The priority clock of one cache. Thread-safe."""

    def __init__(self):
        self._inflation = 0.0
        self._lock = threading.Lock()

    @property
    def inflation(self):
        return self._inflation

    def priority(self, hits, cost, size):
        """Priority of an entry just used (hits >= 1, cost in s, size in B)."""
        return self._inflation + hits * max(cost, 1e-3) / max(size, 1)

    def victims(self, entries, add_size, max_bytes, max_count):
        """Entries to delete so one more of ``add_size`` bytes fits.

        :param entries: objects with ``size``, ``priority`` and ``busy``.
        :param max_bytes: bound on total size (0: none).
        :param max_count: bound on the number of entries (0: none).
        :returns: victims, lowest priority first, or ``None`` if even
            deleting every idle entry would not make room.
        """
        if max_bytes and add_size > max_bytes:
            return None
        size = sum(e.size for e in entries) + add_size
        count = len(entries) + 1
        chosen = []
        for e in sorted((e for e in entries if not e.busy),
                        key=lambda e: e.priority):
            if ((not max_bytes or size <= max_bytes)
                    and (not max_count or count <= max_count)):
                break
            chosen.append(e)
            size -= e.size
            count -= 1
        if ((max_bytes and size > max_bytes)
                or (max_count and count > max_count)):
            return None
        return chosen

    def evicted(self, entry):
        """Age the cache: ``L`` becomes the evicted entry's priority."""
        with self._lock:
            self._inflation = max(self._inflation, entry.priority)
