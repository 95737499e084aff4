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

"""Create volumes from images as clones of golden volumes.

:class:`Mirror` is the whole cache for one backend: it serves
``clone_image`` and is driven by the mirror-volume driver. A request for
an image whose golden volume is ready clones it (a hit). Otherwise one
request per image, the flight's leader, downloads the image into a new
golden volume while concurrent requests for it wait (single flight); then
all clone. Whenever the cache cannot serve (no internal tenant, its quota
exhausted, no room under the limits) the request takes Cinder's normal path
by returning ``(None, False)``; a download or copy that fails is the
request's error, with nothing left behind.
"""

import threading
import time
import types

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import excutils
from oslo_utils import strutils

from cinder import context as cinder_context
from cinder import exception
from cinder.message import api as message_api
from cinder.message import message_field
from cinder.volume import volume_types
from cinder.volume import volume_utils

from mlaccel.cinder import cache
from mlaccel.cinder import golden
from mlaccel.cinder import metadata
from mlaccel.cinder import notify
from mlaccel.cinder import prewarm
from mlaccel.cinder import publish
from mlaccel.cinder import readypool
from mlaccel.cinder import singleflight
from mlaccel import limiter

LOG = logging.getLogger(__name__)


PREWARM_KEY = metadata.PREWARM_KEY


class _Degrade(Exception):
    """The cache cannot serve this request; Cinder's normal path will."""


class Mirror:
    """The golden-volume cache of one backend.

    :param backend: the real volume driver (its ``create_cloned_volume``,
        ``create_volume``, ``copy_image_to_volume`` and ``delete_volume``).
    :param host: the backend's ``host@backend`` name.
    :param conf: the ``[mlaccel_cinder]`` option group.
    """

    def __init__(self, backend, host, conf):
        self.backend = backend
        self.host = host
        self.conf = conf
        self.store = golden.GoldenStore(backend)
        self.notifier = notify.Notifier(host)
        self.cache = cache.MirrorCache(
            self._delete_golden, max_bytes=conf.max_cache_mib * 1024 * 1024,
            max_count=conf.max_cache_count, on_evict=self._evicted)
        self.flights = singleflight.SingleFlight()
        self.pool = readypool.ReadyPool(self, conf.pool_size,
                                        conf.pool_window, conf.pool_adaptive)
        # Downloads and copies into golden volumes, and clones of them,
        # each paced on this backend by a limit that follows their latency.
        self.downloads = limiter.AdaptiveLimiter(
            initial=1, min_limit=1, max_limit=conf.max_concurrent_downloads)
        self.copies = limiter.AdaptiveLimiter(
            initial=min(2, conf.max_concurrent_copies), min_limit=1,
            max_limit=conf.max_concurrent_copies)
        self.stats = {'hit': 0, 'miss': 0, 'join': 0, 'degrade': 0,
                      'evict': 0, 'rebuild': 0, 'fill': 0, 'pool_hit': 0}
        self._stats_lock = threading.Lock()
        self._active = 0
        self._last_done = 0.0
        self._idle = threading.Condition()
        self.messages = message_api.API()
        self.prewarmer = prewarm.Prewarmer(self, conf)
        self.reports = publish.ReportLoop(self, cfg.CONF)

    def _count(self, what):
        with self._stats_lock:
            self.stats[what] += 1

    # -- start ----------------------------------------------------------

    def start(self):
        """Rebuild the index, then start the background tasks."""
        self.recover()
        self.reports.start()
        self.prewarmer.start()

    def stop(self):
        self.prewarmer.stop()
        self.reports.stop()

    def recover(self):
        """Rebuild the index from the golden volume rows and the backend.

        Rows not available (a fill cut short by a crash) and rows whose data
        is gone are deleted; the rest are indexed.
        """
        try:
            found = self.store.find(self.host)
        except golden.NoInternalTenant:
            LOG.warning('No Cinder internal tenant configured: the '
                        'mirror-volume cache is off; volumes from images '
                        'take Cinder\'s normal path.')
            return 0
        for volume in readypool.pooled_rows(self.store, self.host):
            self.store.delete(volume)
        restored = 0
        for volume in found:
            meta = volume.metadata
            image_id = meta[golden.IMAGE_KEY]
            if self.store.alive(volume.id) is None:
                LOG.info('Removing golden volume %s of image %s: %s',
                         volume.id, image_id, volume.status)
                self.store.delete(volume)
                continue
            entry = cache.Entry(
                image_id, int(meta.get(golden.SIZE_KEY, 0)),
                (meta.get(golden.CHECKSUM_KEY, ''),
                 meta.get(golden.UPDATED_KEY, '')),
                volume_id=volume.id,
                cost=float(meta.get(golden.COST_KEY, 0) or 0),
                pinned=golden.PINNED_KEY in meta)
            if self.cache.by_volume(volume.id) is None:
                self.cache.restore(entry)
                restored += 1
        LOG.info('Mirror-volume cache of %s: %d golden volumes restored',
                 self.host, restored)
        return restored

    # -- the clone_image path ---------------------------------------------

    def clone_image(self, context, volume, image_meta, image_service):
        """Clone the image's golden volume into ``volume``.

        :returns: ``(model_update, True)``, or ``(None, False)`` for
            Cinder's normal path.
        """
        image_id = image_meta['id']
        version = golden.image_version(image_meta)
        if volume.size < golden.size_gb(image_meta):
            return None, False
        pin = self._prewarm_request(volume)
        with self._idle:
            self._active += 1
        try:
            missed = False
            self.pool.requested(image_id)
            for _attempt in range(3):
                entry = self.cache.acquire(image_id, version)
                if entry is not None and pin:
                    self._pin(entry)
                if entry is not None:
                    update = self._take_or_clone(context, volume, entry)
                    if update is not False:
                        if not missed:
                            self._count('hit')
                            self.notifier.cache(context, 'hit', image_id)
                        self.pool.want(image_id)
                        return update, True
                    continue
                missed = True
                self._fill_once(context, volume, image_meta, image_service,
                                pin)
            raise exception.ImageCopyFailure(
                reason='golden volume of image %s kept disappearing'
                       % image_id)
        except _Degrade as e:
            return self._degrade(context, volume, image_id, e)
        except Exception:
            with excutils.save_and_reraise_exception():
                self.messages.create(
                    context, message_field.Action.COPY_IMAGE_TO_VOLUME,
                    resource_uuid=volume.id,
                    detail=message_field.Detail.DRIVER_FAILED_CREATE)
        finally:
            with self._idle:
                self._active -= 1
                self._last_done = time.monotonic()
                self._idle.notify_all()

    def _degrade(self, context, volume, image_id, e):
        self._count('degrade')
        self.notifier.mirror(context, 'degrade', image_id, reason=str(e))
        LOG.info('Volume %s from image %s takes Cinder\'s normal path: %s',
                 volume.id, image_id, e)
        return None, False

    def _take_or_clone(self, context, volume, entry):
        """A ready clone if the pool has one, else a clone made now."""
        update = self.pool.take(entry.image_id, volume)
        if update is None:
            return self._clone(context, volume, entry)
        self.cache.release(entry)
        self._count('pool_hit')
        self.notifier.mirror(context, 'pool_hit', entry.image_id)
        return update

    def _clone(self, context, volume, entry):
        """Clone ``entry`` into ``volume``; False if the golden is gone."""
        try:
            source = self.store.source(entry.volume_id)
            if source is None:
                self._gone(context, entry)
                return False
            try:
                with self.copies.slot():
                    started = time.monotonic()
                    update = self.backend.create_cloned_volume(volume,
                                                               source)
                    self.pool.clone_took(time.monotonic() - started)
                    return update or {}
            except Exception:
                with excutils.save_and_reraise_exception() as ctx:
                    if self.store.alive(entry.volume_id) is None:
                        ctx.reraise = False
                        self._gone(context, entry)
                        return False
        finally:
            self.cache.release(entry)

    def _gone(self, context, entry):
        LOG.warning('Golden volume %s of image %s is gone; rebuilding',
                    entry.volume_id, entry.image_id)
        self._count('rebuild')
        self.cache.forget(entry)
        self.reports.changed()
        self._delete_golden(entry)
        self.notifier.mirror(context, 'rebuild', entry.image_id,
                             volume_id=entry.volume_id)

    def _fill_once(self, context, volume, image_meta, image_service,
                   pinned=False):
        image_id = image_meta['id']
        try:
            _result, leader = self.flights.do(
                image_id,
                lambda: self._fill(context, volume, image_meta,
                                   image_service, pinned),
                timeout=self.conf.wait_timeout)
        except singleflight.FlightTimeout as e:
            raise exception.ImageCopyFailure(
                reason='waited for the download of image %s: %s'
                       % (image_id, e))
        if not leader:
            self._count('join')
            self.notifier.mirror(context, 'join', image_id)

    def _fill(self, context, like, image_meta, image_service, pinned):
        image_id = image_meta['id']
        self._count('miss')
        self.notifier.cache(context, 'miss', image_id)
        try:
            entry = self.cache.reserve(
                image_id, golden.image_bytes(image_meta),
                golden.image_version(image_meta), pinned=pinned)
        except cache.NoRoom:
            raise _Degrade('image %s does not fit the cache limits'
                           % image_id)
        try:
            with self.downloads.slot():
                volume, cost = self.store.create(context, like, image_meta,
                                                 image_service, pinned)
        except golden.NoInternalTenant:
            self.cache.forget(entry)
            raise _Degrade('no Cinder internal tenant is configured')
        except exception.OverQuota as e:
            self.cache.forget(entry)
            raise _Degrade('internal tenant quota: %s' % e)
        except Exception as e:
            self.cache.forget(entry)
            LOG.exception('Filling golden volume of image %s failed',
                          image_id)
            if isinstance(e, exception.CinderException):
                detail = e.msg
            else:
                detail = '%s: %s' % (type(e).__name__, e)
            raise exception.ImageCopyFailure(
                reason='image %s could not be copied into its golden volume '
                       '(%s)' % (image_id, detail))
        self.cache.filled(entry, volume.id, cost)
        self.reports.changed()
        self._count('fill')
        self.notifier.mirror(context, 'fill', image_id, volume_id=volume.id,
                             seconds=round(cost, 3))
        return volume.id

    # -- operator actions -----------------------------------------------

    def prewarm(self, context, image_meta, image_service, like=None,
                pin=None, source='operator'):
        """Make the golden volume of an image now; True if one was made.

        :param like: a volume whose host, type and zone the golden volume
            takes; by default the backend's first pool and default type.
        :param source: why (``operator``, or a pre-warm task's source),
            for the ``prewarm`` notification.
        """
        pin = self.conf.pin_prewarmed if pin is None else pin
        like = like or self._like()
        version = golden.image_version(image_meta)
        entry = self.cache.acquire(image_meta['id'], version, count=False)
        if entry is not None:
            if pin:
                self._pin(entry)
            self.cache.release(entry)
            return False
        self._fill_once(context, like, image_meta, image_service, pin)
        self.notifier.mirror(context, 'prewarm', image_meta['id'],
                             source=source)
        self.pool.want(image_meta['id'])
        return True

    def wait_idle(self, timeout, quiet=0.0):
        """Wait until no request has been served for ``quiet`` seconds.

        At most ``timeout`` seconds. The ready pool refills in idle time, so
        its copies never slow the requests of a burst, nor the end of a
        request whose clone is done while Cinder still records it.
        """
        deadline = time.monotonic() + timeout
        with self._idle:
            while True:
                now = time.monotonic()
                calm = now - self._last_done
                if now >= deadline or (self._active == 0 and calm >= quiet):
                    return
                wait = deadline - now
                if self._active == 0:
                    wait = min(wait, quiet - calm)
                self._idle.wait(wait)

    def _prewarm_request(self, volume):
        """Whether ``volume`` is an operator's pre-warm request.

        That is a volume of the internal tenant (an operator scoped to it)
        with metadata ``mlaccel_prewarm=true``; other users cannot pin.
        """
        return (self.conf.pin_prewarmed
                and volume.project_id
                == cfg.CONF.cinder_internal_tenant_project_id
                and strutils.bool_from_string(
                    (volume.metadata or {}).get(PREWARM_KEY)))

    def _pin(self, entry):
        if not entry.pinned:
            entry.pinned = True
            self.store.pin(entry.volume_id)

    def _like(self):
        stats = self.backend.get_volume_stats() or {}
        pools = stats.get('pools') or [stats]
        pool = (pools[0].get('pool_name')
                or stats.get('volume_backend_name') or 'default')
        return types.SimpleNamespace(
            host=volume_utils.append_host(self.host, pool),
            cluster_name=None,
            availability_zone=cfg.CONF.storage_availability_zone,
            volume_type_id=volume_types.get_default_volume_type()['id'])

    def evict(self, image_id):
        return self.cache.evict(image_id)

    def forget_volume(self, volume_id):
        """A golden volume is being deleted through Cinder: drop its entry."""
        self.store.forget(volume_id)
        entry = self.cache.by_volume(volume_id)
        if entry is not None:
            self.cache.forget(entry)
            self.reports.changed()
            self.pool.drain(entry.image_id)

    # -- callbacks --------------------------------------------------------

    def _delete_golden(self, entry):
        try:
            self.pool.drain(entry.image_id)
            volume = self.store.get(entry.volume_id)
            if volume is not None:
                self.store.delete(volume)
        except Exception:
            LOG.exception('Deleting golden volume %s of image %s failed',
                          entry.volume_id, entry.image_id)

    def _evicted(self, entry):
        self._count('evict')
        self.reports.changed()
        self.notifier.cache(cinder_context.get_admin_context(), 'evict',
                            entry.image_id)
