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

"""Which images are hot: named by the operator or marked in Glance.

An image is hot if its id is in ``[mlaccel_agent] hot_images`` or its
Glance property ``[mlaccel_agent] hot_property`` is ``true`` (the Cinder
mirror-volume cache reads the same property). Glance is asked at most every
``hot_refresh_interval`` seconds; between queries the last answer is kept,
and when Glance is unreachable the last answer stays in use.
"""

import time

from oslo_log import log as logging

from mlaccel.agent import cachefile

LOG = logging.getLogger(__name__)

#: Glance's page size for listings.
PAGE = 200


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


class HotImages:
    """The hot images, refreshed from Glance now and then.

    :param conf: ``[mlaccel_agent]`` options.
    :param cloud: a :class:`~mlaccel.agent.cloud.Cloud`.
    """

    def __init__(self, opts, cloud, clock=time.monotonic):
        self.opts = opts
        self.cloud = cloud
        self._clock = clock
        self._next = 0.0
        self._hot = []
        self.failing = False

    def due(self):
        return self._clock() >= self._next

    def refresh(self):
        """Ask Glance again; returns the hot images as ImageMeta, in order.

        Operator-named images come first, in their order. On failure the
        previous answer is returned and the failure logged once.
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
            if self.opts.hot_property:
                for image in list_images(
                        conn, **{self.opts.hot_property: 'true'}):
                    if image['id'] not in seen:
                        hot.append(cachefile.ImageMeta.from_glance(image))
                        seen.add(image['id'])
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

    def all_ids(self):
        """Ids of every active image Glance shows us (to name cache files).

        :raises: what openstacksdk raises.
        """
        return [image['id'] for image in list_images(self.cloud.connection())]
