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

"""Which images are hot: operator-named, marked in Glance, or in demand.

An image is hot if its id is in ``[mlaccel_agent] hot_images``, its
Glance property ``[mlaccel_agent] hot_property`` is ``true`` (the Cinder
mirror-volume cache reads the same property), or builds of it started at
least ``demand_builds`` times on any compute of the cloud within
``demand_window`` seconds (:class:`Demand`, fed from Nova's
``instance.create.start`` notifications of every host). A tenant cannot
make every node fetch its image (:mod:`mlaccel.hottrust`): the property
counts only on images of ``hot_image_owners``, demand only on those and on
public images, and both within ``hot_max_image_mb`` per image and
``hot_max_owner_mb`` per owner. Glance is asked at most every
``hot_refresh_interval`` seconds; between queries the last answer is kept,
and when Glance is unreachable the last answer stays in use.
"""

import collections
import threading
import time

from oslo_log import log as logging

from mlaccel.agent import cachefile
from mlaccel import hottrust

LOG = logging.getLogger(__name__)

#: Glance's page size for listings.
PAGE = 200

MIB = 1024 * 1024


def list_images(conn, **filters):
    """Every active image matching ``filters``, through Glance's v2 API.

    Unlike ``conn.image.images()``, passes image properties of our own as
    filters, which Glance supports and openstacksdk drops. Yields dicts.
    """
    params = dict(filters, status='active', limit=PAGE)
    while True:
        response = conn.image.get('/images', params=params)
        response.raise_for_status()
        images = response.json().get('images', [])
        yield from images
        if len(images) < PAGE:
            return
        params['marker'] = images[-1]['id']


class Demand:
    """Builds started per image across the cloud, over a sliding window.

    Thread-safe. :param window: seconds of builds counted.
    :param min_builds: builds within the window that make an image hot
        (0: demand makes nothing hot).
    """

    def __init__(self, window, min_builds):
        self.window = window
        self.min_builds = min_builds
        self._lock = threading.Lock()
        self._starts = collections.deque()     # (UNIX time, image id)
        self._counts = collections.Counter()

    def seen(self, image_id, when):
        """A build of ``image_id`` started at UNIX time ``when``."""
        if not self.min_builds:
            return
        with self._lock:
            self._starts.append((when, image_id))
            self._counts[image_id] += 1

    def hot(self, now=None):
        """Ids of the images in demand, most built first."""
        if not self.min_builds:
            return []
        now = time.time() if now is None else now
        with self._lock:
            while self._starts and self._starts[0][0] < now - self.window:
                _, image_id = self._starts.popleft()
                self._counts[image_id] -= 1
                if not self._counts[image_id]:
                    del self._counts[image_id]
            return [image_id for image_id, count
                    in self._counts.most_common()
                    if count >= self.min_builds]


class HotImages:
    """The hot images, refreshed from Glance now and then.

    :param conf: ``[mlaccel_agent]`` options.
    :param cloud: a :class:`~mlaccel.agent.cloud.Cloud`.
    :param demand: a :class:`Demand` or ``None``.
    """

    def __init__(self, opts, cloud, clock=time.monotonic, demand=None):
        self.opts = opts
        self.cloud = cloud
        self.demand = demand
        self._clock = clock
        self._next = 0.0
        self._hot = []
        self._refused = set()
        self.failing = False

    def due(self):
        return self._clock() >= self._next

    def refresh(self):
        """Ask Glance again; returns the hot images as ImageMeta, in order.

        Operator-named images come first, in their order, then those
        marked in Glance, then those in demand. On failure the previous
        answer is returned and the failure logged once.
        """
        self._next = self._clock() + self.opts.hot_refresh_interval
        if not self.cloud.configured:
            return []
        try:
            conn = self.cloud.connection()
            hot, seen = [], set()
            for image_id in self.opts.hot_images:
                image = conn.image.find_image(image_id, ignore_missing=True)
                if image is None or image.status != 'active':
                    LOG.warning('Hot image %s named in [mlaccel_agent] '
                                'hot_images is not an active image in '
                                'Glance; skipped', image_id)
                    continue
                hot.append(cachefile.ImageMeta.from_glance(image))
                seen.add(image.id)
            owners = set(self.opts.hot_image_owners
                         or [conn.current_project_id])
            budget = hottrust.Budget(self.opts.hot_max_image_mb * MIB,
                                     self.opts.hot_max_owner_mb * MIB)
            for meta in self._marked(conn):
                if meta.id not in seen and self._admit(
                        meta, budget, hottrust.trusted(meta.owner, owners),
                        'marked hot'):
                    hot.append(meta)
                    seen.add(meta.id)
            for image_id in self.demand.hot() if self.demand else ():
                if image_id in seen:
                    continue
                image = conn.image.find_image(image_id, ignore_missing=True)
                if image is None or image.status != 'active':
                    continue
                meta = cachefile.ImageMeta.from_glance(image)
                if self._admit(meta, budget, hottrust.hot_by_demand(
                        meta.owner, meta.visibility, owners), 'in demand'):
                    hot.append(meta)
                    seen.add(meta.id)
        except Exception as exc:
            if not self.failing:
                LOG.warning('Cannot read hot images from Glance, keeping the '
                            'last %d known: %s', len(self._hot), exc)
            self.failing = True
            return list(self._hot)
        if self.failing:
            LOG.info('Glance answers again: %d hot image(s)', len(hot))
        self.failing = False
        self._hot = hot
        return list(hot)

    def _marked(self, conn):
        if not self.opts.hot_property:
            return []
        return [cachefile.ImageMeta.from_glance(image) for image in
                list_images(conn, **{self.opts.hot_property: 'true'})]

    def _admit(self, meta, budget, trusted, why):
        """Whether ``meta`` is pre-fetched; a refusal is logged once."""
        reason = (None if trusted else
                  'its owner %s is not in [mlaccel_agent] hot_image_owners'
                  % (meta.owner or '(unknown)'))
        reason = reason or budget.refusal(meta.owner, meta.size)
        if reason and meta.id not in self._refused:
            LOG.warning('Image %s is %s but not pre-fetched: %s',
                        meta.id, why, reason)
        if reason:
            self._refused.add(meta.id)
        return reason is None

    def all_ids(self):
        """Ids of every active image Glance shows us (to name cache files).

        :raises: what openstacksdk raises.
        """
        return [image['id'] for image in list_images(self.cloud.connection())]
