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

"""The image cache inventory and nova.conf, on real files."""

import os

from nova.virt.libvirt import imagecache

from mlaccel.agent import inventory
from mlaccel.agent import novaconf
from tests.unit.agent import base


class NovaConfTest(base.NodeTestCase):

    NOVA_CONF = ('force_raw_images = false\n'
                 '[image_cache]\nsubdirectory_name = cache\n'
                 '[oslo_messaging_notifications]\ntransport_url = fake://\n')

    def test_reads_what_nova_compute_reads(self):
        s = self.settings
        self.assertEqual('cmp1', s.host)
        # $state_path is interpolated as Nova does.
        self.assertEqual(os.path.join(self.root, 'instances', 'cache'),
                         s.cache_dir)
        self.assertEqual(os.path.join(self.root, 'instances', 'locks'),
                         s.lock_dir)
        self.assertFalse(s.force_raw)
        self.assertEqual('fake://', s.transport_url)
        self.assertEqual(('versioned_notifications',), s.topics)

    def test_missing_file_is_a_clear_error(self):
        exc = self.assertRaises(novaconf.NovaConfError, novaconf.load,
                                [os.path.join(self.root, 'nope.conf')])
        self.assertIn('does not exist', str(exc))

    def test_unparsable_file_is_a_clear_error(self):
        with open(self.nova_conf, 'w') as f:
            f.write('[DEFAULT\nhost = x\n')
        exc = self.assertRaises(novaconf.NovaConfError, novaconf.load,
                                [self.nova_conf])
        self.assertIn('cannot read', str(exc))

    def test_relative_instances_path_refused(self):
        with open(self.nova_conf, 'w') as f:
            f.write('[DEFAULT]\ninstances_path = rel/dir\n')
        self.assertRaises(novaconf.NovaConfError, novaconf.load,
                          [self.nova_conf])


class InventoryTest(base.NodeTestCase):

    def setUp(self):
        super().setUp()
        self.cache = inventory.ImageCache(self.settings.cache_dir)
        os.makedirs(self.settings.cache_dir)

    def put(self, name, size):
        with open(os.path.join(self.settings.cache_dir, name), 'wb') as f:
            f.write(b'x' * size)

    def test_cache_name_is_novas(self):
        for image_id in ('3c9f5c1a-1b7e-4b8e-9d52-0f1c2a3b4c5d', 'x'):
            self.assertEqual(imagecache.get_cache_fname(image_id),
                             inventory.cache_name(image_id))

    def test_scan_reads_novas_layout_and_maps_ids(self):
        a, b = 'image-a', 'image-b'
        self.put(inventory.cache_name(a), 10)
        self.put(inventory.cache_name(b), 20)
        # Resized copies, swap, ephemeral disks and temporaries are not
        # images.
        self.put(inventory.cache_name(a) + '_10', 5)
        self.put('swap_512', 5)
        self.put(inventory.cache_name(b) + '.part', 5)
        self.assertTrue(self.cache.scan())
        self.assertEqual(frozenset(), self.cache.image_ids())
        self.assertEqual(2, len(self.cache.unknown_names()))
        generation = self.cache.generation
        self.assertEqual([a], self.cache.learn([a, 'not-cached']
                                               )[:1])
        self.assertGreater(self.cache.generation, generation)
        self.assertEqual(frozenset({a}), self.cache.image_ids())
        self.assertEqual(10, self.cache.size_of(a))
        self.assertEqual(30, self.cache.used_bytes)
        self.assertFalse(self.cache.scan())  # nothing changed

    def test_scan_notices_removal_and_growth(self):
        a = 'image-a'
        self.cache.learn([a])
        self.put(inventory.cache_name(a), 10)
        self.cache.scan()
        self.put(inventory.cache_name(a), 11)
        self.assertTrue(self.cache.scan())
        os.unlink(os.path.join(self.settings.cache_dir,
                               inventory.cache_name(a)))
        self.assertTrue(self.cache.scan())
        self.assertFalse(self.cache.has(a))

    def test_missing_directory_is_an_empty_cache(self):
        cache = inventory.ImageCache(os.path.join(self.root, 'none', '_base'))
        cache.scan()
        self.assertEqual(frozenset(), cache.image_ids())
        self.assertGreater(cache.free_bytes, 0)

    def test_room_is_free_space_above_headroom(self):
        self.cache.scan()
        free = self.cache.free_bytes
        self.cache.headroom = free + 1
        self.assertEqual(0, self.cache.room())
        self.cache.headroom = 0
        self.assertEqual(free, self.cache.room())

    def test_remove_temporaries_only_ours(self):
        self.put(inventory.TEMP_PREFIX + 'abc.123.part', 3)
        self.put(inventory.cache_name('a') + '.part', 3)  # nova-compute's
        self.assertEqual([inventory.TEMP_PREFIX + 'abc.123.part'],
                         self.cache.remove_temporaries())
        self.assertEqual([inventory.cache_name('a') + '.part'],
                         self.cache_files())
