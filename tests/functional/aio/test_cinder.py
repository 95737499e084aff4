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

"""The mirror-volume cache in the all-in-one cloud's Cinder.

Needs a running cloud (``python -m mlaccel_lab.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise. Real parts: cinder-api,
cinder-scheduler (with ``GoldenImageWeigher``) and cinder-volume running
the mirror-volume driver over the file-backed test backend, Glance, Nova
booting servers from volumes, RabbitMQ carrying Cinder's notifications,
which tell what the cache did (a hit, a download into a golden volume).
Every test makes an image of its own and deletes every volume it caused.
"""

import concurrent.futures
import uuid

import testtools

from mlaccel.cmd import cinder_config
from mlaccel import inifile
from mlaccel.tempest import mirror
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import fixture

WAIT = 120
IMAGE_BYTES = 2 * 1024 * 1024
BURST = 5
HIT = 'image_volume_cache.hit'
MISS = 'image_volume_cache.miss'
FILL = 'mlaccel.mirror.fill'
DEGRADE = 'mlaccel.mirror.degrade'


class _CinderTest(testtools.TestCase):

    EXCLUSIVE = False

    def setUp(self):
        super().setUp()
        self.aio = self.useFixture(fixture.RunningCloud(self.EXCLUSIVE))
        if not self.aio.layout.settings.cinder:
            self.skipTest('the cloud runs without cinder')
        self.conn = self.aio.connect()
        self.lay = self.aio.layout

    def listen(self):
        events = mirror.CinderEvents(self.lay.transport_url).start()
        self.addCleanup(events.stop)
        return events

    def cinder_conf(self):
        return inifile.IniFile(self.lay.path('etc', 'cinder', 'cinder.conf'))

    def mirror_on(self):
        return self.cinder_conf().get(cloud.CINDER_BACKEND, 'volume_driver')[
            -1] == cinder_config.MIRROR

    def make_image(self, **properties):
        """A new image of random bytes; its cache goes with it."""
        return mirror.make_image(self.conn, self.addCleanup,
                                 IMAGE_BYTES, **properties)

    def create_volume(self, image_id):
        volume = self.conn.block_storage.create_volume(
            size=1, image_id=image_id,
            name='cinder-test-%s' % uuid.uuid4().hex[:8])
        self.addCleanup(self.conn.block_storage.wait_for_delete, volume,
                        interval=0.5, wait=WAIT)
        self.addCleanup(self.conn.block_storage.delete_volume, volume,
                        ignore_missing=True)
        return volume

    def wait_available(self, volume):
        return self.conn.block_storage.wait_for_status(
            volume, 'available', failures=['error'], interval=0.5,
            wait=WAIT)

    def volume_bytes(self, volume, size):
        """The first ``size`` bytes of the volume's file on the backend."""
        volume = self.conn.block_storage.get_volume(volume)
        name = 'volume-%s' % (volume.migration_id or volume.id)
        path = self.lay.path('data', 'cinder', 'volumes', name)
        with open(path, 'rb') as f:
            return f.read(size)


class MirrorVolumeTest(_CinderTest):

    def setUp(self):
        super().setUp()
        if not self.mirror_on():
            self.skipTest('the mirror-volume driver is switched off')

    def test_backend_runs_the_mirror_and_scheduler_its_weigher(self):
        pools = list(self.conn.block_storage.backend_pools(details=True))
        self.assertTrue(pools, 'cinder-volume reports no pool')
        for pool in pools:
            self.assertIs(True, pool.capabilities.get('mlaccel_mirror'),
                          pool.name)
        weighers = self.cinder_conf().get('DEFAULT',
                                          'scheduler_default_weighers')
        self.assertIn(cinder_config.WEIGHER, weighers[-1].split(','))
        # The scheduler loads its weighers on the first request: one it
        # cannot find puts the volume in error.
        image, data = self.make_image()
        volume = self.wait_available(self.create_volume(image.id))
        self.assertEqual(data, self.volume_bytes(volume, IMAGE_BYTES))

    def test_boot_from_volume_of_a_prewarmed_image_clones_its_golden(self):
        events = self.listen()
        image, data = self.make_image(mlaccel_hot='true')
        golden = mirror.wait_golden(self.conn, image.id, WAIT)
        self.assertEqual(data, self.volume_bytes(golden, IMAGE_BYTES))
        self.assertTrue(events.wait(
            lambda: events.count(image.id, FILL) == 1, 30), events.of(
                image.id))
        before = events.of(image.id)

        server = mirror.boot_from_volume(
            self.conn, self.addCleanup, image.id, self.aio.cloud['flavor_id'])
        server = self.conn.compute.wait_for_server(server, interval=0.5,
                                                   wait=WAIT)
        attached = [a.volume_id for a in
                    self.conn.compute.volume_attachments(server)]
        self.assertEqual(1, len(attached))
        self.assertEqual(data, self.volume_bytes(attached[0], IMAGE_BYTES))
        self.assertTrue(events.wait(
            lambda: HIT in events.of(image.id)[len(before):], 30),
            events.of(image.id))
        after = events.of(image.id)[len(before):]
        # A clone of the golden volume (or a ready clone of it): Glance was
        # not asked for the image again.
        for event in (MISS, FILL, DEGRADE):
            self.assertNotIn(event, after)
        self.assertEqual([golden.id], [v.id for v in mirror.
                                       golden_volumes(self.conn, image.id)])

    def test_burst_for_an_uncached_image_makes_one_download(self):
        events = self.listen()
        image, data = self.make_image()
        with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
            volumes = list(pool.map(lambda _: self.create_volume(image.id),
                                    range(BURST)))
        for volume in volumes:
            self.wait_available(volume)
        for volume in volumes:
            self.assertEqual(data, self.volume_bytes(volume, IMAGE_BYTES))
        seen = events.of(image.id)
        self.assertEqual(1, seen.count(FILL), seen)
        self.assertEqual(1, seen.count(MISS), seen)
        self.assertNotIn(DEGRADE, seen)
        self.assertEqual(1, len(mirror.golden_volumes(self.conn,
                                                      image.id)))


class MirrorSwitchTest(_CinderTest):
    """The mirror switched off and on again (cinder restarted twice)."""

    EXCLUSIVE = True

    def test_off_volumes_take_stock_cinder_s_path_then_on_again(self):
        was_on = self.mirror_on()
        self.addCleanup(cloud.set_cinder_mirror, self.lay, was_on, self.conn)
        cloud.set_cinder_mirror(self.lay, False, self.conn)
        self.assertFalse(self.mirror_on())
        events = self.listen()
        image, data = self.make_image()
        volume = self.wait_available(self.create_volume(image.id))
        self.assertEqual(data, self.volume_bytes(volume, IMAGE_BYTES))
        self.assertEqual([], events.of(image.id))
        self.assertEqual([], mirror.golden_volumes(self.conn, image.id))

        cloud.set_cinder_mirror(self.lay, True, self.conn)
        self.assertTrue(self.mirror_on())
        volume = self.wait_available(self.create_volume(image.id))
        self.assertEqual(data, self.volume_bytes(volume, IMAGE_BYTES))
        self.assertTrue(events.wait(
            lambda: FILL in events.of(image.id), 30), events.of(image.id))
