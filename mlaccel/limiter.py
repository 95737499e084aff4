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

"""An adaptive concurrency limiter driven by measured latency.

The limit follows the queue that latency reveals, in the spirit of Netflix
concurrency-limits' *Vegas*: with ``L`` the limit, ``base`` the latency of
work that did not queue (the lowest seen recently) and ``rtt`` a sample,
``L * (1 - base / rtt)`` units of work were waiting rather than working.
While that queue is small the limit grows; past a threshold it shrinks, so
the limit settles where the resource (builds, copies, the API) saturates.
Now and then the limiter re-probes the baseline the way TCP BBR does: it
drains to ``min_limit`` until one piece of work started during the drain
completes, takes that as the new baseline and restores the limit, so a
lasting change in conditions is learned. Failures shrink the limit
multiplicatively. The agent paces builds with it,
the Cinder driver its copies, and the launcher its server creations.

Plain ``threading`` primitives only: correct on native threads and under
eventlet monkey patching alike.
"""

import contextlib
import math
import threading
import time


class LimitExceeded(Exception):
    """No slot became free within the timeout."""


class AdaptiveLimiter:
    """Bound concurrent work by a limit that adapts to measured latency.

    :param initial: starting limit.
    :param min_limit: the limit never drops below this.
    :param max_limit: the limit never rises above this.
    :param alpha: queue length (in units of ``log10(limit)``, at least 1)
        below which the limit grows.
    :param beta: queue length (same units) above which the limit shrinks.
    :param smoothing: weight of each new estimate in the limit (0..1].
    :param probe_every: re-measure the baseline latency after this many
        samples times the limit.
    :param backoff: factor applied to the limit when work fails.
    :param clock: monotonic clock, replaceable for deterministic tests.
    """

    def __init__(self, initial=4, min_limit=1, max_limit=64, alpha=3,
                 beta=6, smoothing=0.5, probe_every=30, backoff=0.9,
                 clock=time.monotonic):
        if not 1 <= min_limit <= initial <= max_limit:
            raise ValueError('need 1 <= min_limit <= initial <= max_limit, '
                             'got %s, %s, %s'
                             % (min_limit, initial, max_limit))
        if not 0 < alpha < beta or not 0 < smoothing <= 1 \
                or not 0 < backoff < 1 or probe_every < 1:
            raise ValueError('need 0 < alpha < beta, 0 < smoothing <= 1, '
                             '0 < backoff < 1 and probe_every >= 1')
        self.min_limit = min_limit
        self.max_limit = max_limit
        self.alpha = alpha
        self.beta = beta
        self.smoothing = smoothing
        self.probe_every = probe_every
        self.backoff = backoff
        self._clock = clock
        self._estimate = float(initial)
        self._base_latency = None
        self._samples = 0
        self._probe = None
        self._in_flight = 0
        self._cond = threading.Condition()

    @property
    def limit(self):
        """Concurrent slots allowed now (an integer >= ``min_limit``)."""
        return max(self.min_limit, int(self._estimate))

    @property
    def in_flight(self):
        return self._in_flight

    @property
    def base_latency(self):
        """Latency of work that did not queue, in seconds (``None`` yet)."""
        return self._base_latency

    def acquire(self, timeout=None):
        """Take a slot, waiting up to ``timeout`` seconds (``None``: forever).

        :returns: a token to hand back to :meth:`release`.
        :raises LimitExceeded: if no slot became free in time.
        """
        with self._cond:
            if not self._cond.wait_for(
                    lambda: self._in_flight < self.limit, timeout):
                raise LimitExceeded('%d of %d slots busy for %.1f s'
                                    % (self._in_flight, self.limit, timeout))
            self._in_flight += 1
        return self._clock()

    def release(self, token, ok=True):
        """Give a slot back and learn from the work's latency and outcome."""
        latency = self._clock() - token
        with self._cond:
            in_flight = self._in_flight
            self._in_flight -= 1
            if ok:
                self._learn(latency, in_flight, token)
            else:
                self._estimate = max(self.min_limit,
                                     self._estimate * self.backoff)
            self._cond.notify_all()

    @contextlib.contextmanager
    def slot(self, timeout=None):
        """Run the ``with`` body in a slot; an exception counts as failure."""
        token = self.acquire(timeout)
        ok = False
        try:
            yield
            ok = True
        finally:
            self.release(token, ok)

    def _learn(self, latency, in_flight, started):
        latency = max(latency, 1e-9)
        if self._probe is not None:
            probe_started, saved = self._probe
            if started >= probe_started:
                # Work that ran while the others drained: a clean baseline.
                self._base_latency = latency
                self._estimate = saved
                self._probe = None
                self._samples = 0
            return
        self._samples += 1
        if self._base_latency is None or latency < self._base_latency:
            self._base_latency = latency
            return
        if self._samples >= self.probe_every * self.limit:
            self._probe = (self._clock(), self._estimate)
            self._estimate = float(self.min_limit)
            return
        if in_flight * 2 < self._estimate:
            # Application-limited: the sample says nothing about capacity.
            return
        scale = max(1.0, math.log10(self._estimate))
        queue = self._estimate * (1 - self._base_latency / latency)
        if queue < self.alpha * scale:
            target = self._estimate + scale
        elif queue > self.beta * scale:
            target = self._estimate - scale
        else:
            return
        estimate = (1 - self.smoothing) * self._estimate \
            + self.smoothing * target
        self._estimate = min(self.max_limit, max(self.min_limit, estimate))

    def __repr__(self):
        return '<AdaptiveLimiter limit=%d in_flight=%d>' % (
            self.limit, self._in_flight)
