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

"""Assemble this node's host report and keep it on the state bus.

Every field has a producer here:

=================  ==========================================================
``cached_images``  image cache scan (:mod:`mlaccel.agent.inventory`), ids
                   mapped from hot images, Glance and builds seen
``cache_free_bytes``  free bytes of the cache's file system above the
                   pre-fetch headroom (0: no room, pre-fetching stopped)
``fetch_bandwidth``  bytes per second of the last pre-fetch
``builds_in_flight``  ``instance.create.start`` without an end yet
``build_throughput``  the limit over the median build time in a window
``build_limit``    the adaptive limiter fed with build durations
=================  ==========================================================

:class:`Reporter` publishes at once when a field other than the timestamp
changes and otherwise every ``report_interval`` seconds; a bus it cannot
reach is retried with backoff while the agent goes on serving.
"""

import time

from oslo_log import log as logging

from mlaccel.agent import AGENT_VERSION
from mlaccel import hostreport
from mlaccel import periodic
from mlaccel import statebus

LOG = logging.getLogger(__name__)

MAX_BACKOFF = 60.0


def assemble(host, cache, builds=None, prefetcher=None, max_images=None,
             now=None):
    """The :class:`~mlaccel.hostreport.HostReport` of this node now."""
    images = cache.image_ids()
    if max_images is not None and len(images) > max_images:
        images = frozenset(sorted(images)[:max_images])
    return hostreport.HostReport(
        host=host,
        timestamp=time.time() if now is None else now,
        cached_images=images,
        cache_free_bytes=cache.room(),
        fetch_bandwidth=prefetcher.bandwidth if prefetcher else 0.0,
        builds_in_flight=builds.in_flight if builds else 0,
        build_throughput=builds.throughput(now) if builds else 0.0,
        build_limit=builds.limit if builds else 0,
        agent_version=AGENT_VERSION)


#: Free-space change worth a publication: the larger of these.
FREE_SPACE_STEP = 64 * 1024 * 1024
FREE_SPACE_SHARE = 0.01


def changed(report, last):
    """Whether ``report`` says something ``last`` did not.

    Free space and throughput drift all the time: they count as changed
    past :data:`FREE_SPACE_STEP` (or 1 %) and 1 % respectively; the
    interval publication carries smaller drifts.
    """
    new, old = report.to_dict(), last.to_dict()
    for data in (new, old):
        data.pop('timestamp')
    free_new = new.pop('cache_free_bytes')
    free_old = old.pop('cache_free_bytes')
    rate_new = new.pop('build_throughput')
    rate_old = old.pop('build_throughput')
    if new != old or (free_new == 0) != (free_old == 0):
        return True
    if abs(free_new - free_old) > max(FREE_SPACE_STEP,
                                      FREE_SPACE_SHARE * free_old):
        return True
    return abs(rate_new - rate_old) > 0.01 * max(rate_old, 1e-9)


class Reporter:
    """Scans, assembles and publishes; one thread.

    :param publisher: a :class:`~mlaccel.statebus.publisher.Publisher`.
    :param make_report: returns the current report.
    :param scan: called before each report (cache scan, expiry...).
    :param interval: seconds between publications without change.
    :param tick: seconds between two scans.
    """

    def __init__(self, publisher, make_report, scan, interval, tick,
                 conf=None):
        self.publisher = publisher
        self.make_report = make_report
        self.scan = scan
        self.interval = interval
        self.tick = tick
        self.conf = conf
        self._loop = periodic.Periodic(
            'mlaccel-agent-report', lambda: self.tick, self.step,
            wakeable=True,
            on_error=lambda exc: LOG.exception('Host report step failed; '
                                               'going on'))
        self.published = None       # the last report on the bus
        self.failing = False
        self._next_try = 0.0
        self._delay = 1.0

    def start(self):
        self._loop.start()

    def wake(self):
        """Scan and publish now."""
        self._loop.wake()

    def stop(self, timeout=10.0):
        """Stop the thread and leave the bus (the report disappears)."""
        self._loop.stop(timeout)
        self.publisher.stop()

    def step(self, now=None):
        """Scan, and publish if due; returns whether it published."""
        now = time.monotonic() if now is None else now
        self.scan()
        report = self.make_report()
        last = self.published
        due = last is None or changed(report, last) or \
            report.timestamp - last.timestamp >= self.interval
        if not due or now < self._next_try:
            return False
        try:
            self.publisher.publish(report)
        except Exception as exc:
            text = statebus.redact(self.conf, exc) if self.conf else exc
            if not self.failing:
                LOG.warning('Cannot publish the host report, retrying with '
                            'backoff: %s', text)
            self.failing = True
            self._next_try = now + self._delay
            self._delay = min(self._delay * 2, MAX_BACKOFF)
            return False
        if self.failing:
            LOG.info('The host report is on the state bus again')
        self.failing = False
        self._delay = 1.0
        self._next_try = 0.0
        self.published = report
        return True
