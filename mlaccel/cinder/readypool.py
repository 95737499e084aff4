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

"""The ready pool: clones of a hot image's golden volume made in advance.

A request for an image with a pooled clone takes that clone instead of
waiting for one: the new volume adopts the clone's backend object through
Cinder's ``_name_id`` (the mechanism volume migration uses), so no data moves
and any backend that names its objects after ``volume.name`` works. The
clone's own row is then removed, keeping the backend object.

The pool of an image follows its demand: its target size is the number of
requests for the image in the last ``pool_window`` seconds, halved, at most
``pool_size``; a pinned (pre-warmed) image keeps ``pool_size`` clones.
Clones are made by one background thread per backend, never on a request's
path, when no request has been served for ``QUIET`` seconds (or after
``IDLE_WAIT`` seconds).
Pooled clones are owned by Cinder's internal tenant, like golden volumes;
after a restart they are deleted, not restored.

A handover is a few database writes (the clone's quota and row); a clone on
a copy-on-write backend can cost less. The pool measures both (moving
averages of the backend's clones and of its handovers) and stands aside,
neither handing over nor refilling, while clones are the cheaper. Until a
handover has been measured it is taken to cost ``HANDOVER_PRIOR`` seconds,
so that a copy-on-write backend's first request after a pre-warm is a clone,
not a handover that teaches the pool it should not have made one.
"""

import collections
import threading
import time

from oslo_log import log as logging

from mlaccel.cinder import metadata


LOG = logging.getLogger(__name__)

POOL_KEY = metadata.POOL_KEY
# Seconds a refill waits for the requests in progress to finish.
IDLE_WAIT = 30
# Seconds without requests before a refill starts: a request served from the
# pool is still being recorded by Cinder's flow when its clone is done.
QUIET = 0.5
# Seconds a handover is taken to cost until one is measured: a few database
# writes (``python -m mlaccel_lab.bench cinder`` measures 14 to 37 ms). A clone
# that copies data takes a tenth of a second per 100 MiB or more, a
# copy-on-write clone about a millisecond.
HANDOVER_PRIOR = 0.05


class ReadyPool:
    """Pooled clones per image, and the thread that refills them.

    :param mirror: the :class:`mlaccel.cinder.mirror.Mirror` it serves.
    """

    def __init__(self, mirror, size, window, adaptive=True,
                 clock=time.monotonic):
        self.mirror = mirror
        self.size = size
        self.window = window
        self.adaptive = adaptive
        self._clock = clock
        self._ready = collections.defaultdict(list)    # image -> [volume]
        self._requests = collections.defaultdict(collections.deque)
        self._wanted = set()
        self._busy = False      # the refill thread is at work
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        #: Moving averages, in seconds, of a backend clone and a handover.
        self.clone_seconds = None
        self.handover_seconds = None

    def count(self, image_id):
        with self._lock:
            return len(self._ready.get(image_id, ()))

    def idle(self):
        """Whether no refill is queued or under way."""
        with self._lock:
            return not self._wanted and not self._busy

    def worth_it(self):
        """Whether a handover costs less than a clone (or it is unmeasured).

        A handover not measured yet counts as ``HANDOVER_PRIOR``.
        """
        clone, handover = self.clone_seconds, self.handover_seconds
        if handover is None:
            handover = HANDOVER_PRIOR
        return not self.adaptive or clone is None or clone > handover

    def clone_took(self, seconds):
        """Record how long the backend took to clone a golden volume."""
        self.clone_seconds = _average(self.clone_seconds, seconds)

    def target(self, image_id, pinned):
        if not self.worth_it():
            return 0
        if pinned:
            return self.size
        with self._lock:
            return min(self.size, len(self._requests[image_id]) // 2)

    def requested(self, image_id):
        """Record a request for an image (it drives the target size)."""
        now = self._clock()
        with self._lock:
            q = self._requests[image_id]
            q.append(now)
            while q and q[0] < now - self.window:
                q.popleft()

    def take(self, image_id, volume):
        """A ready clone for ``volume`` as a model update, or None."""
        if not self.worth_it():
            return None
        with self._lock:
            ready = self._ready.get(image_id)
            member = ready.pop() if ready else None
        if member is None:
            return None
        started = time.monotonic()
        try:
            if volume.size > member.size:
                self.mirror.backend.extend_volume(member, volume.size)
            name_id = member.name_id
            self.mirror.store.disown(member)
        except Exception:
            LOG.exception('Pooled clone %s could not be handed over',
                          member.id)
            self.mirror.store.delete(member)
            return None
        self.handover_seconds = _average(self.handover_seconds,
                                         time.monotonic() - started)
        # The volume takes over the clone's backend object, and with it
        # what the backend said of it when it made it.
        return {'_name_id': name_id,
                'shared_targets': member.shared_targets}

    def want(self, image_id):
        """Ask the refill thread to bring an image's pool to its target."""
        if not self.size:
            return
        with self._lock:
            self._wanted.add(image_id)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name='mlaccel-ready-pool', daemon=True)
                self._thread.start()
        self._wake.set()

    def drain(self, image_id):
        """Delete an image's pooled clones (its golden volume is going)."""
        with self._lock:
            members = self._ready.pop(image_id, [])
        for member in members:
            self.mirror.store.delete(member)

    def _run(self):
        while True:
            self._wake.wait()
            self._wake.clear()
            while True:
                with self._lock:
                    if not self._wanted:
                        self._busy = False
                        break
                    image_id = self._wanted.pop()
                    self._busy = True
                try:
                    self._refill(image_id)
                except Exception:
                    LOG.exception('Refilling the ready pool of image %s '
                                  'failed', image_id)

    def _refill(self, image_id):
        while True:
            entry = self.mirror.cache.peek(image_id)
            if entry is None:
                return
            if self.count(image_id) >= self.target(image_id, entry.pinned):
                return
            self.mirror.wait_idle(IDLE_WAIT, QUIET)
            entry = self.mirror.cache.acquire(image_id, entry.version,
                                              count=False)
            if entry is None:
                return
            try:
                with self.mirror.copies.slot():
                    member = self.mirror.store.clone(
                        entry.volume_id, POOL_KEY, image_id,
                        timed=self.clone_took)
            finally:
                self.mirror.cache.release(entry)
            if member is None:
                return
            with self._lock:
                current = self.mirror.cache.peek(image_id)
                keep = current is entry and not entry.stale
                if keep:
                    self._ready[image_id].append(member)
            if not keep:
                self.mirror.store.delete(member)
                return
            self.mirror.notifier.mirror(None, 'pool_fill', image_id,
                                        volume_id=member.id)


def _average(old, sample, weight=0.3):
    return sample if old is None else (1 - weight) * old + weight * sample


def pooled_rows(store, host):
    """Pooled clones found on start (to be deleted)."""
    return store.find(host, key=POOL_KEY)
