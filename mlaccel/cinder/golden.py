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

"""Golden volumes: one image's bytes on one backend, in the internal tenant.

A golden volume is an ordinary Cinder volume row (so quota, ``cinder
list --all-tenants`` and the backend agree) whose metadata names the image
it holds. That metadata is the cache's durable state: after a restart the
cache is rebuilt from these rows and the backend.

A raw image is streamed from the image service straight into the golden
volume when the backend exposes the volume as a writable local path (file
and local-disk backends): no temporary copy in ``image_conversion_dir`` and
no ``qemu-img convert`` pass over the data, which Cinder's generic
``copy_image_to_volume`` makes. It is written with direct I/O where the
file system has it, as Cinder writes volumes (:mod:`.imagewrite`); runs of
zeros are skipped, so the golden volume stays sparse. Its first MiB is
inspected before anything is written: an image declared raw that holds
another format takes Cinder's path, whose format checks refuse it. Other
images and backends take the backend's ``copy_image_to_volume``.
"""

import math
import os
import threading
import time

from eventlet import tpool
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import units

from cinder import context as cinder_context
from cinder.db import api as cinder_db
from cinder import exception
from cinder import objects
from cinder.objects import fields
from cinder import quota

from mlaccel.cinder import imagewrite
from mlaccel.cinder import metadata
from mlaccel import imagesafety

LOG = logging.getLogger(__name__)
QUOTAS = quota.QUOTAS

IMAGE_KEY = metadata.IMAGE_KEY
CHECKSUM_KEY = metadata.CHECKSUM_KEY
UPDATED_KEY = metadata.UPDATED_KEY
SIZE_KEY = metadata.SIZE_KEY
COST_KEY = metadata.COST_KEY
PINNED_KEY = metadata.PINNED_KEY


class NoInternalTenant(Exception):
    """Cinder's internal tenant is not configured."""


def image_version(image_meta):
    """``(checksum, updated_at)`` strings identifying an image's content."""
    checksum = (image_meta.get('os_hash_value')
                or image_meta.get('checksum') or '')
    updated = image_meta.get('updated_at') or ''
    if not isinstance(updated, str):
        updated = timeutils.normalize_time(updated).isoformat()
    return checksum, updated


def image_bytes(image_meta):
    return int(image_meta.get('virtual_size') or image_meta.get('size') or 0)


def size_gb(image_meta):
    return max(1, math.ceil(image_bytes(image_meta) / units.Gi))


def internal_context():
    ctx = cinder_context.get_internal_tenant_context()
    if ctx is None:
        raise NoInternalTenant()
    return ctx


def streamable(image_meta):
    """Whether an image's bytes are the volume's bytes, to stream as is.

    Raw, in no container, and not to be verified against a signature
    (Cinder verifies those on its own path).
    """
    properties = image_meta.get('properties') or {}
    return (image_meta.get('disk_format') == 'raw'
            and image_meta.get('container_format') in (None, 'bare')
            and not (cfg.CONF.verify_glance_signatures != 'disabled'
                     and 'img_signature' in properties))


class GoldenStore:
    """Create, check, find and delete golden volumes through a backend."""

    def __init__(self, backend):
        self.backend = backend
        # Golden rows as last read in full, by id (see :meth:`source`).
        self._rows = {}
        self._rows_lock = threading.Lock()

    def create(self, user_context, like, image_meta, image_service,
               pinned=False):
        """Make and fill a golden volume for ``image_meta`` beside ``like``.

        :returns: ``(volume, seconds it took)``.
        :raises NoInternalTenant, exception.OverQuota: nothing was made.
        :raises: the backend's or the download's error; nothing is left.
        """
        ctx = internal_context()
        size = size_gb(image_meta)
        opts = {'volumes': 1, 'gigabytes': size}
        QUOTAS.add_volume_type_opts(ctx, opts, like.volume_type_id)
        reservations = QUOTAS.reserve(ctx, **opts)
        checksum, updated = image_version(image_meta)
        image_id = image_meta['id']
        try:
            volume = objects.Volume(
                context=ctx, host=like.host, cluster_name=like.cluster_name,
                availability_zone=like.availability_zone,
                volume_type_id=like.volume_type_id, size=size,
                status='creating',
                attach_status=fields.VolumeAttachStatus.DETACHED,
                user_id=ctx.user_id, project_id=ctx.project_id,
                display_name='mlaccel-golden-%s' % image_id,
                metadata=dict({IMAGE_KEY: image_id, CHECKSUM_KEY: checksum,
                               UPDATED_KEY: updated,
                               SIZE_KEY: str(image_bytes(image_meta))},
                              **({PINNED_KEY: 'true'} if pinned else {})))
            volume.create()
        except Exception:
            QUOTAS.rollback(ctx, reservations)
            raise
        QUOTAS.commit(ctx, reservations, project_id=ctx.project_id)
        start = time.monotonic()
        try:
            update = self.backend.create_volume(volume)
            if update:
                volume.update(update)
                volume.save()
            self._fill(user_context, volume, image_meta, image_service)
        except Exception:
            LOG.warning('Golden volume %s for image %s failed; removing it',
                        volume.id, image_id)
            self.delete(volume)
            raise
        cost = time.monotonic() - start
        volume.status = 'available'
        volume.metadata = dict(volume.metadata, **{COST_KEY: '%.3f' % cost})
        volume.save()
        # Read in full now, not on the first request's path.
        self.alive(volume.id)
        return volume, cost

    def _fill(self, context, volume, image_meta, image_service):
        path = self._local_path(volume)
        if (path is None or not streamable(image_meta)
                or not os.access(path, os.W_OK)):
            self.backend.copy_image_to_volume(context, volume, image_service,
                                              image_meta['id'])
            return
        sink = imagewrite.open_sink(path)
        raw = imagewrite.RawOnly(sink, image_meta['id'])
        try:
            try:
                # Writes in a native thread under eventlet, as Cinder's.
                image_service.download(context, image_meta['id'],
                                       tpool.Proxy(raw))
                raw.finish()
            finally:
                sink.close()
        except imagesafety.UnsafeImage as exc:
            # Nothing was written: Cinder's own path inspects it again.
            LOG.warning('%s; not streamed as raw: Cinder copies and checks '
                        'it instead', exc)
            self.backend.copy_image_to_volume(context, volume, image_service,
                                              image_meta['id'])

    def clone(self, source_id, key, image_id, timed=None):
        """A new internal-tenant clone of a golden volume, or None.

        :param timed: called with the seconds the backend's clone took.

        :returns: the clone's row (available), or None when the golden
            volume is gone or the internal tenant's quota is exhausted.
        """
        ctx = internal_context()
        source = self.alive(source_id)
        if source is None:
            return None
        opts = {'volumes': 1, 'gigabytes': source.size}
        QUOTAS.add_volume_type_opts(ctx, opts, source.volume_type_id)
        try:
            reservations = QUOTAS.reserve(ctx, **opts)
        except exception.OverQuota:
            return None
        try:
            volume = objects.Volume(
                context=ctx, host=source.host,
                cluster_name=source.cluster_name,
                availability_zone=source.availability_zone,
                volume_type_id=source.volume_type_id, size=source.size,
                status='creating',
                attach_status=fields.VolumeAttachStatus.DETACHED,
                user_id=ctx.user_id, project_id=ctx.project_id,
                display_name='mlaccel-pool-%s' % image_id,
                metadata={key: image_id})
            volume.create()
        except Exception:
            QUOTAS.rollback(ctx, reservations)
            raise
        QUOTAS.commit(ctx, reservations, project_id=ctx.project_id)
        try:
            started = time.monotonic()
            update = self.backend.create_cloned_volume(volume, source)
            if timed is not None:
                timed(time.monotonic() - started)
            if update:
                volume.update(update)
        except Exception:
            self.delete(volume)
            raise
        volume.status = 'available'
        volume.save()
        return volume

    def pin(self, volume_id):
        """Record in the golden volume's row that it is pinned."""
        self.forget(volume_id)
        volume = self.get(volume_id)
        if volume is not None:
            volume.metadata = dict(volume.metadata, **{PINNED_KEY: 'true'})
            volume.save()

    def disown(self, volume):
        """Remove a row and its quota but keep its backend object."""
        self.forget(volume.id)
        self._release_quota(volume)
        volume.destroy()

    def _release_quota(self, volume):
        ctx = internal_context()
        try:
            opts = {'volumes': -1, 'gigabytes': -volume.size}
            QUOTAS.add_volume_type_opts(ctx, opts, volume.volume_type_id)
            reservations = QUOTAS.reserve(ctx, project_id=volume.project_id,
                                          **opts)
            QUOTAS.commit(ctx, reservations, project_id=volume.project_id)
        except Exception:
            LOG.exception('Quota release for volume %s failed', volume.id)

    def delete(self, volume):
        """Delete a golden volume from the backend, the DB and the quota."""
        self.forget(volume.id)
        try:
            self.backend.delete_volume(volume)
        except Exception:
            LOG.exception('Backend could not delete golden volume %s',
                          volume.id)
            volume.status = 'error_deleting'
            volume.save()
            return False
        self._release_quota(volume)
        try:
            volume.destroy()
        except exception.VolumeNotFound:
            pass
        return True

    def get(self, volume_id):
        """The golden volume row, or None if it was deleted."""
        try:
            return objects.Volume.get_by_id(internal_context(), volume_id)
        except exception.VolumeNotFound:
            return None

    def alive(self, volume_id):
        """The golden volume row if it is available and its data exists."""
        volume = self.get(volume_id)
        if (volume is None or volume.status != 'available'
                or not self._data_exists(volume)):
            self.forget(volume_id)
            return None
        with self._rows_lock:
            self._rows[volume_id] = volume
        return volume

    def source(self, volume_id):
        """The golden volume to clone from, or None when it is gone.

        The row is the one :meth:`alive` last read in full (the fill reads
        it when it is done); a request checks only that the row and its
        data still exist (a query without joins), and gets a copy of its
        own.
        """
        with self._rows_lock:
            row = self._rows.get(volume_id)
        if row is None:
            row = self.alive(volume_id)
            if row is None:
                return None
        elif not (cinder_db.resource_exists(internal_context(),
                                            objects.Volume.model, volume_id)
                  and self._data_exists(row)):
            self.forget(volume_id)
            return None
        return row.obj_clone()

    def forget(self, volume_id):
        """Drop what is remembered of a golden volume's row."""
        with self._rows_lock:
            self._rows.pop(volume_id, None)

    def _data_exists(self, volume):
        path = self._local_path(volume)
        return path is None or os.path.exists(path)

    def _local_path(self, volume):
        try:
            return self.backend.local_path(volume)
        except (NotImplementedError, AttributeError):
            return None

    def find(self, host, key=IMAGE_KEY):
        """Every golden volume row on ``host`` (a backend, ``host@name``).

        :param key: the metadata key that marks the rows wanted.
        """
        ctx = internal_context()
        found = []
        for volume in objects.VolumeList.get_all_by_host(ctx, host):
            if (volume.project_id == ctx.project_id
                    and key in (volume.metadata or {})):
                found.append(volume)
        return found
