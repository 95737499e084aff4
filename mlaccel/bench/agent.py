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

"""First build of a large image on a fresh host, with and without pre-fetch.

``python -m mlaccel.bench agent [--image-mib 1024] [--host HOST]`` runs
against the all-in-one cloud named by ``$MLACCEL_AIO_BASE`` (``python -m
mlaccel.testing.aio up``). It uploads an image of random bytes to Glance,
boots one server with it on the last compute while that compute's image
cache lacks it (the build downloads it), deletes it and the cached file,
then pre-fetches the image into that cache with the agent's Glance fetcher
and boots again. Each boot is timed from the create request to ACTIVE. The
last line is::

    RESULT first_boot_prefetch_ratio=<r>

the pre-fetched boot's time over the cold boot's (lower is better).
"""

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

from oslo_concurrency import lockutils

from mlaccel.agent import cachefile
from mlaccel.agent import cloud as agent_cloud
from mlaccel.agent.fetchers import glance
from mlaccel.agent import inventory
from mlaccel.agent import novaconf
from mlaccel import conf as mlaccel_conf
from mlaccel.testing.aio import cloud as aio_cloud
from mlaccel.testing.aio import layout as aio_layout

WAIT = 900


def _image_file(directory, mib):
    path = os.path.join(directory, 'bench.raw')
    with open(path, 'wb') as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    return path


def _boot(conn, host, image_id, flavor_id):
    """Seconds from the create request to ACTIVE; the server is deleted."""
    started = time.monotonic()
    server = conn.compute.create_server(
        name='mlaccel-bench-agent', image_id=image_id, flavor_id=flavor_id,
        networks='none', availability_zone='nova:%s' % host)
    try:
        conn.compute.wait_for_server(server, interval=0.2, wait=WAIT)
        return time.monotonic() - started
    finally:
        conn.compute.delete_server(server, ignore_missing=True)
        conn.compute.wait_for_delete(server, interval=0.5, wait=WAIT)


def _uncache(settings, image_id):
    name = inventory.cache_name(image_id)
    with lockutils.lock(name, lock_file_prefix='nova-', external=True,
                        lock_path=settings.lock_dir):
        try:
            os.unlink(os.path.join(settings.cache_dir, name))
        except FileNotFoundError:
            pass


def main(argv):
    parser = argparse.ArgumentParser(prog='python -m mlaccel.bench agent')
    parser.add_argument('--image-mib', type=int, default=1024)
    parser.add_argument('--host', help='compute host (default: the last)')
    args = parser.parse_args(argv)
    base = os.environ.get(aio_layout.BASE_ENV)
    if not base:
        print('set %s to the base directory of a running all-in-one cloud'
              % aio_layout.BASE_ENV, file=sys.stderr)
        return 2
    lay = aio_layout.Layout(base)
    host = args.host or lay.compute_hosts()[-1]
    etc = lay.path('etc', 'nova')
    settings = novaconf.load([os.path.join(etc, 'nova.conf'),
                              os.path.join(etc, 'compute-%s.conf' % host)])
    need = 3 * (args.image_mib << 20)
    if shutil.disk_usage(lay.base).free < need:
        print('need %d MiB free for the image, its copy in Glance and the '
              'cache' % (need >> 20), file=sys.stderr)
        return 2
    conn = aio_cloud.connect(lay)
    flavor_id = lay.load_cloud()['flavor_id']
    with tempfile.TemporaryDirectory(dir=lay.base) as tmp:
        with open(_image_file(tmp, args.image_mib), 'rb') as data:
            image = conn.image.create_image(
                name='mlaccel-bench-agent', data=data, disk_format='raw',
                container_format='bare')
    try:
        image = conn.image.wait_for_status(image, 'active', wait=WAIT)
        _uncache(settings, image.id)
        cold = _boot(conn, host, image.id, flavor_id)
        _uncache(settings, image.id)
        opts = mlaccel_conf.CONF.mlaccel_agent
        fetcher = glance.GlanceFetcher(
            settings, opts, agent_cloud.Cloud(None, connect=lambda n: conn),
            inventory.ImageCache(settings.cache_dir))
        written = fetcher.fetch(cachefile.ImageMeta.from_glance(
            conn.image.get_image(image.id)), threading.Event())
        warm = _boot(conn, host, image.id, flavor_id)
    finally:
        _uncache(settings, image.id)
        conn.image.delete_image(image, ignore_missing=True)
    print('image %d MiB on %s: cold first boot %.2f s, pre-fetch %.2f s, '
          'first boot after pre-fetch %.2f s'
          % (args.image_mib, host, cold, written.seconds, warm),
          file=sys.stderr)
    print('RESULT first_boot_prefetch_ratio=%.3f' % (warm / cold))
    return 0
