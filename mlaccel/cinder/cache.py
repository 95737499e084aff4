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

"""The in-memory index of one backend's golden volumes.

Each entry is an image's golden volume with what eviction needs (size,
cost to re-create, hits, priority) and what keeps it safe (the clones in
progress that reference it, a pin). Every decision is made under one lock;
golden volumes are deleted outside it. The index is rebuilt from the golden
volumes' rows on start (see :mod:`mlaccel.cinder.golden`).
"""

import threading

from mlaccel.cinder import eviction


class Entry:
    def __init__(self, image_id, size, version, volume_id=None, cost=0.0,
                 pinned=False):
        self.image_id = image_id
        self.size = size
        self.version = version
        self.volume_id = volume_id
        self.cost = cost
        self.pinned = pinned
        self.hits = 0
        self.priority = 0.0
        self.refs = 0
        self.stale = False

    @property
    def filling(self):
        return self.volume_id is None

    @property
    def busy(self):
        return self.refs > 0 or self.pinned or self.filling

    def view(self):
        return {'image_id': self.image_id, 'volume_id': self.volume_id,
                'size': self.size, 'cost': round(self.cost, 3),
                'hits': self.hits, 'priority': self.priority,
                'refs': self.refs, 'pinned': self.pinned,
                'filling': self.filling}


class NoRoom(Exception):
    """The limits leave no room for the image, even after eviction."""


class MirrorCache:
    """Golden-volume index with GDSF eviction under bytes and count limits.

    :param delete: called (outside the lock) with each entry to delete.
    """

    def __init__(self, delete, max_bytes=0, max_count=0, on_evict=None):
        self._delete = delete
        self._on_evict = on_evict or (lambda entry: None)
        self.max_bytes = max_bytes
        self.max_count = max_count
        self.policy = eviction.GDSF()
        self._entries = {}
        self._lock = threading.Lock()

    def entries(self):
        with self._lock:
            return [e.view() for e in self._entries.values()]

    def by_volume(self, volume_id):
        with self._lock:
            for e in self._entries.values():
                if e.volume_id == volume_id:
                    return e
        return None

    def peek(self, image_id):
        """The ready entry of an image, without a reference, or None."""
        with self._lock:
            e = self._entries.get(image_id)
            return None if e is None or e.filling else e

    def acquire(self, image_id, version, count=True):
        """Take a reference on the ready, current entry of an image.

        An entry of another version of the image is dropped (and its golden
        volume deleted once no clone uses it). Returns None on a miss.
        ``count=False`` takes the reference without counting a use.
        """
        doomed = None
        with self._lock:
            e = self._entries.get(image_id)
            if e is None or e.filling:
                return None
            if e.version != version:
                doomed = self._unlink(e)
                e = None
            else:
                e.refs += 1
                if count:
                    e.hits += 1
                    e.priority = self.policy.priority(e.hits, e.cost,
                                                      e.size)
        self._finish(doomed)
        return e

    def release(self, entry):
        with self._lock:
            entry.refs -= 1
            doomed = entry if entry.stale and entry.refs == 0 else None
        self._finish(doomed)

    def fits(self, size):
        """Whether an entry of ``size`` bytes fits without evicting any."""
        with self._lock:
            return self.policy.victims(list(self._entries.values()), size,
                                       self.max_bytes, self.max_count) == []

    def reserve(self, image_id, size, version, pinned=False):
        """Make room for, and index, a new entry being filled.

        :raises NoRoom: the limits cannot fit it; nothing was evicted.
        """
        with self._lock:
            current = [e for k, e in self._entries.items() if k != image_id]
            victims = self.policy.victims(current, size, self.max_bytes,
                                          self.max_count)
            if victims is None:
                raise NoRoom()
            doomed = [self._unlink(v) for v in victims]
            old = self._entries.get(image_id)
            if old is not None:
                doomed.append(self._unlink(old))
            entry = self._entries[image_id] = Entry(image_id, size, version,
                                                    pinned=pinned)
        for v in victims:
            self.policy.evicted(v)
            self._on_evict(v)
        for d in doomed:
            self._finish(d)
        return entry

    def filled(self, entry, volume_id, cost):
        with self._lock:
            entry.volume_id = volume_id
            entry.cost = cost
            entry.priority = self.policy.priority(1, cost, entry.size)

    def restore(self, entry):
        """Index an entry found on start (no eviction: it exists already)."""
        with self._lock:
            entry.priority = self.policy.priority(1, entry.cost, entry.size)
            self._entries[entry.image_id] = entry

    def drop(self, entry):
        """Forget an entry; delete its golden volume when no clone uses it."""
        with self._lock:
            doomed = self._unlink(entry)
        self._finish(doomed)

    def forget(self, entry):
        """Forget an entry whose golden volume is gone already."""
        with self._lock:
            if self._entries.get(entry.image_id) is entry:
                del self._entries[entry.image_id]
            entry.stale = True

    def evict(self, image_id):
        """Operator eviction, pinned or not; False if busy or absent."""
        with self._lock:
            e = self._entries.get(image_id)
            if e is None or e.refs or e.filling:
                return False
            doomed = self._unlink(e)
        self.policy.evicted(e)
        self._on_evict(e)
        self._finish(doomed)
        return True

    def _unlink(self, e):
        if self._entries.get(e.image_id) is e:
            del self._entries[e.image_id]
        e.stale = True
        return e if e.refs == 0 and not e.filling else None

    def _finish(self, doomed):
        if doomed is not None and doomed.volume_id is not None:
            self._delete(doomed)
