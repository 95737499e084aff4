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

"""Ask Nova to pre-cache an image (aggregate image pre-cache, 2.81).

Nova's conductor asks every compute of the aggregate to cache the image;
nova-compute writes the file itself, so it is exactly what a build reuses.
The fetcher waits until the file shows up in this node's cache.
"""

import os
import time

from mlaccel.agent import cachefile
from mlaccel.agent import inventory

MICROVERSION = '2.81'


class NovaPrecacheFetcher:
    """Pre-cache through ``POST /os-aggregates/{id}/images``."""

    name = 'nova-precache'
    #: Seconds between two looks at the cache while Nova works.
    poll = 1.0

    def __init__(self, settings, opts, cloud, cache):
        if not opts.precache_aggregate:
            raise ValueError('the nova-precache fetcher needs '
                             '[mlaccel_agent] precache_aggregate')
        self.settings = settings
        self.opts = opts
        self.cloud = cloud
        self.cache = cache

    def fetch(self, image, stopping):
        self.cache.scan()
        if self.cache.has(image.id):
            return None
        need = image.bytes_needed(self.settings.force_raw)
        if self.cache.free_bytes - need < self.cache.headroom:
            raise cachefile.NoRoom(
                'image %s needs %d bytes; the cache has %d above the '
                'headroom' % (image.id, need, self.cache.room()))
        conn = self.cloud.connection()
        aggregate = conn.compute.find_aggregate(
            self.opts.precache_aggregate, ignore_missing=False)
        started = time.monotonic()
        response = conn.compute.post(
            '/os-aggregates/%s/images' % aggregate.id,
            json={'cache': [{'id': image.id}]},
            microversion=MICROVERSION)
        if response.status_code != 202:
            raise cachefile.FetchFailed(
                'Nova refused to pre-cache image %s on aggregate %s: HTTP '
                '%d %s' % (image.id, self.opts.precache_aggregate,
                           response.status_code, response.text[:200]))
        deadline = started + self.opts.fetch_timeout
        while not self.cache.has(image.id):
            if stopping.wait(self.poll):
                raise cachefile.Abandoned('image %s: the agent is stopping '
                                          '(Nova goes on caching it)'
                                          % image.id)
            if time.monotonic() > deadline:
                raise cachefile.Abandoned(
                    'image %s: Nova did not cache it within %.0f s'
                    % (image.id, self.opts.fetch_timeout))
            self.cache.scan()
        return cachefile.Written(
            os.path.join(self.cache.path, inventory.cache_name(image.id)),
            self.cache.size_of(image.id) or 0,
            time.monotonic() - started)
