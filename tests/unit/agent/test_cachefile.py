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

"""Putting images into Nova's cache: real files, real qemu-img, real locks."""

import dataclasses
import os
import shutil
import subprocess
import threading

import fixtures
from oslo_concurrency import lockutils
import testtools

from mlaccel.agent import cachefile
from mlaccel.agent import inventory
from tests.unit.agent import base
from tests import unsafe_images

DATA = os.urandom(3 * 4096 + 17)


class WriteTest(base.NodeTestCase):

    NOVA_CONF = 'force_raw_images = true\n'

    def final(self, image_id='img'):
        return os.path.join(self.settings.cache_dir,
                            inventory.cache_name(image_id))

    def write(self, image, data=DATA, **kwargs):
        kwargs.setdefault('headroom', 0)
        return cachefile.write(self.settings, image, base.chunks(data),
                               **kwargs)

    def test_verified_image_lands_under_novas_name(self):
        written = self.write(base.image('img', DATA))
        self.assertEqual(self.final(), written.path)
        with open(self.final(), 'rb') as f:
            self.assertEqual(DATA, f.read())
        self.assertEqual(len(DATA), written.downloaded)
        self.assertEqual([inventory.cache_name('img')], self.cache_files())
        self.assertEqual(0o644, os.stat(self.final()).st_mode & 0o777)

    def test_cached_image_is_not_fetched_again(self):
        self.write(base.image('img', DATA))

        def never():
            raise AssertionError('downloaded a cached image')
        self.assertIsNone(cachefile.write(
            self.settings, base.image('img', DATA), never, 0))

    def test_hash_mismatch_discarded(self):
        bad = base.image('img', DATA, hash_value='0' * 128)
        exc = self.assertRaises(cachefile.Corrupt, self.write, bad)
        self.assertIn('does not match', str(exc))
        self.assertEqual([], self.cache_files())

    def test_truncated_download_discarded(self):
        image = base.image('img', DATA)
        exc = self.assertRaises(cachefile.Corrupt, self.write, image,
                                data=DATA[:-100])
        self.assertIn('truncated', str(exc))
        self.assertEqual([], self.cache_files())

    def test_broken_stream_discarded(self):
        def chunks():
            yield DATA[:4096]
            raise ConnectionError('Glance went away')
        self.assertRaises(ConnectionError, cachefile.write, self.settings,
                          base.image('img', DATA), chunks, 0)
        self.assertEqual([], self.cache_files())

    def test_unverifiable_image_refused(self):
        image = cachefile.ImageMeta(id='img', size=len(DATA))
        self.assertRaises(cachefile.Corrupt, self.write, image)
        self.assertEqual([], self.cache_files())

    def test_md5_checksum_when_glance_has_no_multihash(self):
        import hashlib
        image = cachefile.ImageMeta(id='img', size=len(DATA),
                                    checksum=hashlib.md5(DATA).hexdigest())
        self.assertIsNotNone(self.write(image))

    def test_headroom_refuses_before_downloading(self):
        # More than the whole file system: other tests freeing space at
        # the same time cannot make room for it.
        headroom = shutil.disk_usage(self.root).total + 1
        exc = self.assertRaises(cachefile.NoRoom, self.write,
                                base.image('img', DATA), headroom=headroom)
        self.assertIn('headroom', str(exc))
        self.assertEqual([], self.cache_files())

    def test_disk_filled_by_others_during_download_abandons(self):
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.agent.cachefile.CHECK_EVERY', 4096))
        filler = os.path.join(self.root, 'filler')
        headroom = shutil.disk_usage(self.root).free - len(DATA) - (8 << 20)

        def chunks():
            yield DATA[:4096]
            # Someone else takes 1 GiB meanwhile: far more than what other
            # writers on this file system may free in the meantime.
            with open(filler, 'wb') as f:
                os.posix_fallocate(f.fileno(), 0, 1 << 30)
                os.fsync(f.fileno())
            yield DATA[4096:]
        exc = self.assertRaises(cachefile.NoRoom, cachefile.write,
                                self.settings, base.image('img', DATA),
                                chunks, headroom)
        self.assertIn('filled past the headroom', str(exc))
        self.assertEqual([], self.cache_files())

    def test_stop_abandons_and_cleans(self):
        stopping = threading.Event()

        def chunks():
            yield DATA[:4096]
            stopping.set()
            yield DATA[4096:]
        self.assertRaises(cachefile.Abandoned, cachefile.write,
                          self.settings, base.image('img', DATA), chunks, 0,
                          stopping=stopping)
        self.assertEqual([], self.cache_files())

    def test_waits_for_nova_computes_lock(self):
        """nova-compute holds its lock while it fills the file: we reuse."""
        name = inventory.cache_name('img')
        ready, release = threading.Event(), threading.Event()

        def nova_compute():
            with lockutils.lock(name, lock_file_prefix='nova-',
                                external=True,
                                lock_path=self.settings.lock_dir):
                ready.set()
                release.wait(30)
                with open(self.final(), 'wb') as f:
                    f.write(DATA)
        os.makedirs(self.settings.cache_dir, exist_ok=True)
        thread = threading.Thread(target=nova_compute)
        thread.start()
        self.addCleanup(thread.join)
        ready.wait(30)
        result = []
        ours = threading.Thread(target=lambda: result.append(
            self.write(base.image('img', DATA))))
        ours.start()
        release.set()
        ours.join(30)
        self.assertEqual([None], result)  # nova-compute's file, reused

    @testtools.skipUnless(shutil.which('qemu-img'), 'needs qemu-img')
    def test_qcow2_converted_to_raw_as_nova_does(self):
        raw = os.path.join(self.root, 'disk.raw')
        with open(raw, 'wb') as f:
            f.write(DATA[:4096] * 16)
        qcow2 = os.path.join(self.root, 'disk.qcow2')
        subprocess.run(['qemu-img', 'convert', '-f', 'raw', '-O', 'qcow2',
                        raw, qcow2], check=True)
        with open(qcow2, 'rb') as f:
            data = f.read()
        self.write(base.image('img', data, disk_format='qcow2'), data=data)
        with open(self.final(), 'rb') as f, open(raw, 'rb') as g:
            self.assertEqual(g.read(), f.read())
        self.assertEqual([inventory.cache_name('img')], self.cache_files())

    def test_mislabelled_format_fails_cleanly(self):
        image = base.image('img', DATA, disk_format='qcow2')
        self.assertRaises(cachefile.FetchFailed, self.write, image)
        self.assertEqual([], self.cache_files())


class HostileImageTest(base.NodeTestCase):
    """Images that name host files never reach Nova's cache (OSSA-2024-001).

    Real qemu-img makes each image and, where the agent gets that far,
    converts it; nothing is mocked.
    """

    NOVA_CONF = 'force_raw_images = true\n'

    def setUp(self):
        super().setUp()
        self.uploads = self.useFixture(fixtures.TempDir()).path

    def assertRefused(self, path, disk_format, error=cachefile.Unsafe):
        data = unsafe_images.read(path)
        exc = self.assertRaises(
            error, cachefile.write, self.settings,
            base.image('img', data, disk_format=disk_format),
            base.chunks(data), 0)
        self.assertEqual([], self.cache_files())
        return exc

    def test_backing_file_refused(self):
        exc = self.assertRefused(unsafe_images.backing_file(self.uploads),
                                 'qcow2')
        self.assertIn('safety check', str(exc))

    def test_backing_file_refused_without_conversion(self):
        """Kept as qcow2, Nova would open the backing file at boot."""
        self.settings = dataclasses.replace(self.settings, force_raw=False)
        self.assertRefused(unsafe_images.backing_file(self.uploads), 'qcow2')

    def test_external_data_file_refused(self):
        exc = self.assertRefused(unsafe_images.data_file(self.uploads),
                                 'qcow2')
        self.assertIn('safety check', str(exc))

    def test_qcow2_declared_raw_refused(self):
        exc = self.assertRefused(unsafe_images.plain_qcow2(self.uploads),
                                 'raw')
        self.assertIn('declared raw but holds qcow2', str(exc))

    def test_backing_file_declared_raw_refused(self):
        self.assertRefused(unsafe_images.backing_file(self.uploads), 'raw')

    def test_vmdk_descriptor_naming_a_host_file_refused(self):
        self.assertRefused(unsafe_images.vmdk_descriptor(self.uploads),
                           'vmdk')

    def test_unknown_disk_format_refused(self):
        self.assertRefused(unsafe_images.plain_qcow2(self.uploads), 'foo')

    def test_virtual_size_beyond_the_disk_refused_before_converting(self):
        """A 1 MiB qcow2 of a 64 TiB disk: the headroom check sees 64 TiB."""
        exc = self.assertRefused(
            unsafe_images.plain_qcow2(self.uploads, '64T'), 'qcow2',
            error=cachefile.NoRoom)
        self.assertIn('%d bytes' % (64 << 40), str(exc))
