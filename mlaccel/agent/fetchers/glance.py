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

"""Download an image straight from Glance into Nova's image cache."""

from mlaccel.agent import cachefile

CHUNK = 1024 * 1024


class GlanceFetcher:
    """Stream from Glance, verify, rename into place.

    The download goes through openstacksdk's image proxy; the rest is
    :func:`mlaccel.agent.cachefile.write`.
    """

    name = 'glance'

    def __init__(self, settings, opts, cloud, cache):
        self.settings = settings
        self.opts = opts
        self.cloud = cloud
        self.cache = cache

    def fetch(self, image, stopping):
        conn = self.cloud.connection()

        def open_chunks():
            response = conn.image.download_image(image.id, stream=True,
                                                 chunk_size=CHUNK)
            return _Body(response)

        return cachefile.write(
            self.settings, image, open_chunks, self.cache.headroom,
            stopping=stopping, timeout=self.opts.fetch_timeout)


class _Body:
    """A streamed response's chunks, closable."""

    def __init__(self, response):
        self.response = response

    def __iter__(self):
        return self.response.iter_content(CHUNK)

    def close(self):
        self.response.close()
