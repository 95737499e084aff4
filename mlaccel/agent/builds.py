# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Build pacing: builds in flight, durations, throughput, the limit.

:class:`BuildTracker` is fed one event per Nova notification of this host
(a build started, ended or failed, with the notification's own timestamp)
and drives an :class:`~mlaccel.limiter.AdaptiveLimiter` whose clock is the
notifications' clock: a build's latency is the time between its
``instance.create.start`` and ``.end`` as nova-compute stamped them, not
when they reached the agent. The limiter admits a build into a slot when
one is free; a build over the limit (the scheduler sent it anyway, e.g.
every host was full) is counted in flight but teaches the limiter nothing,
since its latency includes queueing the limit did not cause.

Thread-safe: every method takes the tracker's lock.
"""

import collections
import contextlib
import statistics
import threading
import time

from oslo_log import log as logging

from mlaccel import limiter as mlaccel_limiter

LOG = logging.getLogger(__name__)

#: Durations kept for :attr:`BuildTracker.median_duration`.
_DURATIONS = 100


class BuildTracker:
    """What the notifications of one host say about its builds.

    :param limiter_args: keyword arguments of the ``AdaptiveLimiter``
        (``initial``, ``min_limit``, ``max_limit``).
    :param build_timeout: seconds after which a build without an end is
        forgotten as failed.
    :param window: seconds of completed builds measured for throughput.
    """

    def __init__(self, build_timeout=3600.0, window=600.0, **limiter_args):
        self._now = 0.0
        self.limiter = mlaccel_limiter.AdaptiveLimiter(
            clock=lambda: self._now, **limiter_args)
        self.build_timeout = build_timeout
        self.window = window
        self._lock = threading.Lock()
        self._builds = {}       # instance -> (started, limiter token|None)
        self._ends = collections.deque()    # (end time, duration)
        self._durations = collections.deque(maxlen=_DURATIONS)
        self._generation = 0
        #: Builds seen completing successfully since the agent started.
        self.completed = 0

    @property
    def generation(self):
        """Bumped by every change of in-flight builds or the limit."""
        return self._generation

    def started(self, instance, when):
        """``instance.create.start`` of ``instance`` at UNIX time ``when``."""
        with self._lock:
            if instance in self._builds:
                return  # a duplicate delivery
            try:
                with self._at(when):
                    token = self.limiter.acquire(timeout=0)
            except mlaccel_limiter.LimitExceeded:
                token = None
            self._builds[instance] = (when, token)
            self._generation += 1

    def ended(self, instance, when, ok=True):
        """``.end`` (``ok``) or ``.error`` of ``instance`` at ``when``."""
        with self._lock:
            began = self._builds.pop(instance, None)
            if ok:
                self.completed += 1
            if began is None:
                self._generation += 1
                return  # started before the agent listened
            start, token = began
            if ok:
                duration = max(0.0, when - start)
                self._durations.append(duration)
                self._ends.append((when, duration))
            if token is not None:
                before = self.limiter.limit
                self._release(token, when, ok)
                if self.limiter.limit != before:
                    LOG.info('Build limit %d -> %d (builds in flight %d)',
                             before, self.limiter.limit, len(self._builds))
            self._generation += 1

    def _release(self, token, when, ok):
        with self._at(when):
            self.limiter.release(token, ok)

    @contextlib.contextmanager
    def _at(self, when):
        """Run the limiter at notification time ``when``."""
        latest = max(self._now, when)
        self._now = when
        try:
            yield
        finally:
            self._now = latest

    def expire(self, now=None):
        """Forget builds older than ``build_timeout``; returns how many."""
        now = time.time() if now is None else now
        with self._lock:
            old = [instance for instance, (start, _) in self._builds.items()
                   if now - start > self.build_timeout]
            for instance in old:
                start, token = self._builds.pop(instance)
                LOG.warning('Build of %s started %.0f s ago without an end '
                            'notification; forgotten as failed', instance,
                            now - start)
                if token is not None:
                    self._release(token, now, False)
            if old:
                self._generation += 1
            return len(old)

    @property
    def in_flight(self):
        with self._lock:
            return len(self._builds)

    @property
    def limit(self):
        return self.limiter.limit

    def throughput(self, now=None):
        """Builds per second the host sustains at its limit (0: unknown).

        ``limit`` builds at once, each taking the median duration of the
        successful builds that ended within the window (Little's law). Made
        from durations, not from a count of completions: a host that was
        merely sent fewer builds does not look slower.
        """
        now = time.time() if now is None else now
        with self._lock:
            while self._ends and self._ends[0][0] < now - self.window:
                self._ends.popleft()
            if not self._ends:
                return 0.0
            median = statistics.median(d for _, d in self._ends)
            return self.limiter.limit / median if median > 0 else 0.0

    @property
    def median_duration(self):
        """Median seconds of recent successful builds (``None``: none)."""
        with self._lock:
            return statistics.median(self._durations) \
                if self._durations else None
