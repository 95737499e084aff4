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

"""Pre-warm: golden volumes made before the first request for an image.

A background task of the mirror-volume driver, every ``prewarm_interval``
seconds, makes the golden volumes of, in this order:

* the images an operator names (``[mlaccel_cinder] prewarm_images``);
* the images marked hot in Glance: property ``hot_image_property`` is
  ``true``, the property the compute agent pre-fetches by, on an image of
  one of ``hot_image_owners`` (:mod:`mlaccel.hottrust`);
* the images hot on the state bus: in the image caches of at least
  ``bus_hot_min_hosts`` compute nodes by their host reports, the most
  widely cached first, at most ``bus_hot_max_images``.

The first two are pinned (``pin_prewarmed``). Images hot on the bus are made
only where the cache limits have room without evicting anything, and are not
pinned: eviction treats them like any other entry.
"""

import collections
import threading

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import strutils

from cinder import exception
from cinder.image import glance

from mlaccel.cinder import golden
from mlaccel import hottrust
from mlaccel import periodic
from mlaccel.statebus import reader

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

NAMED, MARKED, BUS = 'named', 'marked', 'bus'


class GlanceContext:
    """Internal-tenant contexts for Glance calls no user made.

    With Cinder's ``[glance]`` credentials set (``auth_type`` and its
    options, Cinder's own settings for privileged Glance access), the calls
    carry that user's token, and Glance's endpoint comes from the catalog
    when ``glance_api_servers`` is not set. The credentials are loaded and
    the endpoint looked up once, by the first call that succeeds: every
    later pass reuses the token (keystoneauth renews it before it expires)
    instead of logging in again, which costs Keystone a password hash.

    :param conf: the options to read (default: Cinder's).
    """

    def __init__(self, conf=None):
        self.conf = conf or CONF
        self._lock = threading.Lock()
        self._auth = None
        self._catalog = None

    def __call__(self):
        ctx = golden.internal_context()
        if self.conf.glance.auth_type:
            ctx.user_auth_plugin, catalog = self._credentials()
            if catalog is not None:
                ctx.service_catalog = catalog
        return ctx

    def _credentials(self):
        with self._lock:
            if self._auth is None:
                conf = self.conf
                auth = ks_loading.load_auth_from_conf_options(conf, 'glance')
                catalog = None
                if conf.glance_api_servers is None:
                    session = ks_loading.load_session_from_conf_options(
                        conf, 'glance', auth=auth)
                    service_type, _name, endpoint_type = (
                        conf.glance_catalog_info.split(':'))
                    url = session.get_endpoint(
                        service_type=service_type,
                        interface=endpoint_type.replace('URL', ''),
                        region_name=conf.glance.region_name)
                    catalog = [{'type': service_type,
                                'endpoints': [{endpoint_type: url}]}]
                # Kept only once the lookup worked: a failed one is tried
                # again by the next pass.
                self._auth, self._catalog = auth, catalog
            return self._auth, self._catalog


def marked_hot(image_meta, prop):
    """Whether an image's property ``prop`` says it is hot."""
    value = (image_meta.get('properties') or {}).get(prop)
    if value is None:
        value = image_meta.get(prop)
    return strutils.bool_from_string(value)


def bus_hot(snapshot, min_hosts, limit):
    """Image ids cached on at least ``min_hosts`` nodes, most cached first.

    :param snapshot: a :class:`mlaccel.statebus.reader.Snapshot` of host
        reports; stale reports do not count.
    """
    counts = collections.Counter()
    for host in list(snapshot.reports):
        report = snapshot.get(host)
        if report is not None:
            counts.update(report.cached_images)
    hot = sorted((n, image_id) for image_id, n in counts.items()
                 if n >= min_hosts)
    return [image_id for _n, image_id in reversed(hot)][:limit]


class Prewarmer:
    """The pre-warm task of one backend's :class:`~.mirror.Mirror`.

    :param image_service: callable returning a fresh image service.
    :param context: callable returning the context for Glance calls
        (default: a :class:`GlanceContext`).
    :param reports: callable returning the host reports' snapshot.
    """

    def __init__(self, mirror, conf, image_service=None, context=None,
                 reports=None):
        self.mirror = mirror
        self.conf = conf
        self.image_service = (
            image_service or glance.get_default_image_service)
        self.context = context or GlanceContext()
        self.reports = reports or (lambda: reader.get_cache().snapshot())
        self._loop = periodic.Periodic(
            'mlaccel-prewarm', lambda: self.conf.prewarm_interval,
            self.run_once, on_error=lambda exc: LOG.exception(
                'Pre-warm pass failed; going on'))
        self._refused = set()
        self.passes = 0

    def candidates(self, context, image_service):
        """``[(image_meta, source)]`` to pre-warm, without duplicates."""
        found, seen = [], set()

        def add(meta, source):
            if meta['id'] not in seen and meta.get('status') == 'active':
                seen.add(meta['id'])
                found.append((meta, source))

        for image_id in self.conf.prewarm_images:
            try:
                add(image_service.show(context, image_id), NAMED)
            except exception.ImageNotFound:
                LOG.warning('Image %s named in [mlaccel_cinder] '
                            'prewarm_images does not exist; skipped',
                            image_id)
        prop = self.conf.hot_image_property
        owners = set(self.conf.hot_image_owners or [context.project_id])
        if prop:
            for meta in image_service.detail(
                    context, filters={prop: 'true', 'status': 'active'}):
                if not marked_hot(meta, prop):
                    continue
                if hottrust.trusted(meta.get('owner'), owners):
                    add(meta, MARKED)
                elif meta['id'] not in self._refused:
                    self._refused.add(meta['id'])
                    LOG.warning('Image %s is marked hot but its owner %s is '
                                'not in [mlaccel_cinder] hot_image_owners: '
                                'not pre-warmed', meta['id'],
                                meta.get('owner'))
        if self.conf.bus_hot_min_hosts:
            for image_id in bus_hot(self.reports(),
                                    self.conf.bus_hot_min_hosts,
                                    self.conf.bus_hot_max_images):
                try:
                    add(image_service.show(context, image_id), BUS)
                except exception.ImageNotFound:
                    pass  # deleted from Glance since the report
        return found

    def run_once(self):
        """One pass; returns the number of golden volumes made."""
        made = 0
        try:
            context = self.context()
        except golden.NoInternalTenant:
            return 0
        image_service = self.image_service()
        try:
            candidates = self.candidates(context, image_service)
        except Exception:
            LOG.exception('Pre-warm: cannot list the images to pre-warm')
            return 0
        for meta, source in candidates:
            if self._loop.stopping.is_set():
                break
            if source == BUS and not self.mirror.cache.fits(
                    golden.image_bytes(meta)):
                continue
            try:
                if self.mirror.prewarm(context, meta, image_service,
                                       pin=self.conf.pin_prewarmed
                                       and source != BUS, source=source):
                    made += 1
            except Exception as e:
                LOG.warning('Pre-warm of image %s (%s) failed: %s',
                            meta['id'], source, e)
        self.passes += 1
        return made

    def start(self):
        """Run a pass now and then every ``prewarm_interval`` seconds."""
        if self.conf.prewarm_interval:
            self._loop.start()

    def stop(self):
        """Stop after the image being pre-warmed, without waiting."""
        self._loop.stop(timeout=0)
