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

"""Pre-fetch hot images into the image cache, paced and within headroom.

Each round takes the hot images (:mod:`mlaccel.agent.hot`) missing from the
cache and fetches them through the configured fetcher, at most as many at
once as an :class:`~mlaccel.limiter.AdaptiveLimiter` (bounded by
``max_concurrent_fetches``) allows from the download times it measures. No
fetch starts while the node's builds fill its build limit, or while the
file system has no room above the headroom; a failed image is retried
with exponential backoff, an unreachable cloud likewise as a whole.
"""

import threading
import time

from oslo_log import log as logging

from mlaccel.agent import cachefile
from mlaccel import limiter as mlaccel_limiter
from mlaccel import periodic

LOG = logging.getLogger(__name__)

FIRST_RETRY = 30.0
LAST_RETRY = 3600.0


class Prefetcher:
    """Keeps the hot images in the cache; see the module's doc.

    :param fetcher: a fetcher plugin (:mod:`mlaccel.agent.fetchers`).
    :param hot: :class:`~mlaccel.agent.hot.HotImages`.
    :param cache: :class:`~mlaccel.agent.inventory.ImageCache`.
    :param builds: :class:`~mlaccel.agent.builds.BuildTracker` or ``None``.
    :param on_change: called after an image was fetched.
    """

    def __init__(self, fetcher, hot, cache, builds=None, max_fetches=2,
                 interval=2.0, on_change=None, clock=time.monotonic):
        self.fetcher = fetcher
        self.hot = hot
        self.cache = cache
        self.builds = builds
        self.interval = interval
        self.on_change = on_change or (lambda: None)
        self._clock = clock
        self.limiter = mlaccel_limiter.AdaptiveLimiter(
            initial=1, min_limit=1, max_limit=max_fetches)
        self._lock = threading.Lock()
        self._running = {}          # image id -> thread
        self._retry = {}            # image id -> (delay, not before)
        self._hot = []
        self.bandwidth = 0.0
        #: Why pre-fetching stopped for lack of room (``None``: it did not).
        self.no_room = None
        self.stopping = threading.Event()
        self._loop = periodic.Periodic(
            'mlaccel-agent-prefetch', lambda: self.interval, self.round,
            stop_event=self.stopping,
            on_error=lambda exc: LOG.exception('Pre-fetch round failed; '
                                               'going on'))

    def start(self):
        self._loop.start()

    def stop(self, timeout=30.0):
        """Abandon running fetches (their temporaries are removed)."""
        self._loop.stop(timeout)
        with self._lock:
            threads = list(self._running.values())
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def wanted(self):
        """Hot images missing from the cache, in order."""
        if self.hot.due():
            self._hot = self.hot.refresh()
            self.cache.learn(image.id for image in self._hot)
        return [image for image in self._hot
                if not self.cache.has(image.id)]

    def round(self):
        """Start the fetches allowed now; returns the threads started."""
        started = []
        for image in self.wanted():
            if self.stopping.is_set():
                break
            with self._lock:
                retry = self._retry.get(image.id)
                if image.id in self._running or (
                        retry is not None and self._clock() < retry[1]):
                    continue
            if self.builds is not None and \
                    self.builds.in_flight >= self.builds.limit:
                break  # builds first
            need = image.bytes_needed(self.fetcher.settings.force_raw)
            if self.cache.room() < need:
                self._out_of_room(
                    'image %s needs %d bytes, the cache has %d above the '
                    'headroom' % (image.id, need, self.cache.room()))
                break
            try:
                token = self.limiter.acquire(timeout=0)
            except mlaccel_limiter.LimitExceeded:
                break
            thread = threading.Thread(
                target=self._fetch, args=(image, token), daemon=True,
                name='mlaccel-agent-fetch-%s' % image.id[:8])
            with self._lock:
                self._running[image.id] = thread
            thread.start()
            started.append(thread)
        return started

    def _out_of_room(self, reason):
        if self.no_room is None:
            LOG.warning('Pre-fetching stops: no room above the headroom: %s',
                        reason)
        self.no_room = reason

    def _fetch(self, image, token):
        ok = False
        try:
            written = self.fetcher.fetch(image, self.stopping)
            ok = True
            with self._lock:
                self._retry.pop(image.id, None)
            if written is not None:
                self.bandwidth = written.downloaded / max(written.seconds,
                                                          1e-6)
                LOG.info('Pre-fetched image %(id)s: %(bytes)d bytes in '
                         '%(sec).1f s', {'id': image.id,
                                         'bytes': written.downloaded,
                                         'sec': written.seconds})
            if self.no_room is not None:
                LOG.info('Pre-fetching resumes: there is room again')
            self.no_room = None
        except cachefile.NoRoom as exc:
            self._out_of_room(str(exc))
            self._backoff(image)
        except cachefile.Abandoned as exc:
            LOG.info('Pre-fetch abandoned: %s', exc)
            self._backoff(image)
        except cachefile.FetchFailed as exc:
            LOG.warning('Pre-fetch failed, nothing kept: %s', exc)
            self._backoff(image)
        except Exception as exc:
            LOG.warning('Pre-fetch of image %s failed (cloud unreachable?), '
                        'retrying later: %s', image.id, exc)
            self._backoff(image)
        finally:
            self.limiter.release(token, ok)
            with self._lock:
                self._running.pop(image.id, None)
            self.cache.scan()
            self.on_change()

    def _backoff(self, image):
        with self._lock:
            delay = self._retry.get(image.id, (FIRST_RETRY / 2, 0))[0] * 2
            delay = min(delay, LAST_RETRY)
            self._retry[image.id] = (delay, self._clock() + delay)

    @property
    def running(self):
        with self._lock:
            return frozenset(self._running)
