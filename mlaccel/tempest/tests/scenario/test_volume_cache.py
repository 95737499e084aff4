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

"""Boot from volume through the mirror-volume cache: clones, not copies."""

import concurrent.futures

from tempest import config
from tempest.lib import decorators

from mlaccel.tempest import mirror
from mlaccel.tempest.tests import base

CONF = config.CONF

IMAGE_BYTES = 2 * 1024 * 1024
BURST = 3
HIT = 'image_volume_cache.hit'
MISS = 'image_volume_cache.miss'
FILL = 'mlaccel.mirror.fill'
DEGRADE = 'mlaccel.mirror.degrade'


class VolumeCacheTest(base.MlaccelAdminTest):
    """Servers booted from volumes made from images by Cinder.

    Cinder's volume backend runs the mirror-volume driver, which tells what
    it did by Cinder's notifications (``image_volume_cache.hit`` for a
    clone of a golden volume, ``mlaccel.mirror.fill`` for a download into
    one); the tests listen to them on
    ``[mlaccel] cinder_notification_url``. Images marked hot in Glance
    (``mlaccel_hot=true``) are pre-warmed by the driver's pre-warm task.
    """

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.cinder:
            raise cls.skipException('cinder is not available')
        if not CONF.mlaccel.cinder_notification_url:
            raise cls.skipException('no [mlaccel] cinder_notification_url')

    def listen(self):
        events = mirror.CinderEvents(
            CONF.mlaccel.cinder_notification_url).start()
        self.addCleanup(events.stop)
        return events

    def boot(self, conn, image_id):
        return mirror.boot_from_volume(
            conn, self.addCleanup, image_id, CONF.compute.flavor_ref)

    def wait_active(self, conn, server):
        return conn.compute.wait_for_server(
            server, interval=1, wait=CONF.compute.build_timeout)

    @decorators.idempotent_id('3f1d7a52-6c0e-4b8a-9d21-5e7f0c4a8b13')
    def test_boot_from_volume_of_a_prewarmed_image_is_a_clone(self):
        conn = self.connect()
        events = self.listen()
        image, _data = mirror.make_image(conn, self.addCleanup,
                                         IMAGE_BYTES, mlaccel_hot='true')
        mirror.wait_golden(conn, image.id, CONF.compute.build_timeout)
        self.assertTrue(events.wait(
            lambda: FILL in events.of(image.id), 30), events.of(image.id))
        before = len(events.of(image.id))

        self.wait_active(conn, self.boot(conn, image.id))
        self.assertTrue(events.wait(
            lambda: HIT in events.of(image.id)[before:], 30),
            events.of(image.id))
        after = events.of(image.id)[before:]
        for event in (MISS, FILL, DEGRADE):
            self.assertNotIn(event, after)

    @decorators.idempotent_id('a8c4e2f0-1b7d-4d39-8e65-0f2b9c7d4e61')
    def test_burst_of_boot_from_volume_for_an_uncached_image(self):
        conn = self.connect()
        events = self.listen()
        image, _data = mirror.make_image(conn, self.addCleanup,
                                         IMAGE_BYTES)
        with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
            servers = list(pool.map(lambda _: self.boot(conn, image.id),
                                    range(BURST)))
        for server in servers:
            self.wait_active(conn, server)
        seen = events.of(image.id)
        self.assertEqual(1, seen.count(FILL), seen)
        self.assertEqual(1, seen.count(MISS), seen)
        self.assertNotIn(DEGRADE, seen)
        self.assertEqual(
            1, len(mirror.golden_volumes(conn, image.id)))
