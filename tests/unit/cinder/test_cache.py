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


from mlaccel.cinder import cache

from tests import testcase


class MirrorCacheTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.deleted = []
        self.evicted = []
        self.cache = cache.MirrorCache(
            lambda e: self.deleted.append(e.image_id), max_bytes=10,
            on_evict=lambda e: self.evicted.append(e.image_id))

    def add(self, image_id, size=4, cost=1.0, version='v1', pinned=False):
        e = self.cache.reserve(image_id, size, version, pinned=pinned)
        self.cache.filled(e, 'vol-' + image_id, cost)
        return e

    def test_filling_entry_is_a_miss_and_not_evictable(self):
        e = self.cache.reserve('a', 4, 'v1')
        self.assertIsNone(self.cache.acquire('a', 'v1'))
        self.assertRaises(cache.NoRoom, self.cache.reserve, 'b', 7, 'v1')
        self.cache.filled(e, 'vol-a', 1.0)
        self.assertIs(e, self.cache.acquire('a', 'v1'))

    def test_entry_being_cloned_is_not_evicted(self):
        self.add('a')
        self.add('b')
        a = self.cache.acquire('a', 'v1')
        self.add('c')
        self.assertEqual(['b'], self.deleted)
        self.cache.release(a)

    def test_value_decides_not_recency(self):
        self.add('a', cost=1.0)
        for _ in range(3):
            self.cache.release(self.cache.acquire('a', 'v1'))
        self.add('b', cost=1.0)
        self.add('c')
        self.assertEqual(['b'], self.deleted)
        self.assertEqual(['b'], self.evicted)

    def test_pinned_entry_stays(self):
        self.add('a', pinned=True)
        self.add('b')
        self.add('c')
        self.assertEqual(['b'], self.deleted)

    def test_new_version_drops_old_after_its_clones(self):
        self.add('a')
        cloning = self.cache.acquire('a', 'v1')
        self.assertIsNone(self.cache.acquire('a', 'v2'))
        self.assertEqual([], self.deleted)
        self.cache.release(cloning)
        self.assertEqual(['a'], self.deleted)

    def test_operator_evicts_pinned_but_not_busy(self):
        self.add('a', pinned=True)
        e = self.cache.acquire('a', 'v1')
        self.assertFalse(self.cache.evict('a'))
        self.cache.release(e)
        self.assertTrue(self.cache.evict('a'))
        self.assertEqual(['a'], self.deleted)
        self.assertFalse(self.cache.evict('a'))

    def test_forget_does_not_delete(self):
        e = self.add('a')
        self.cache.forget(e)
        self.assertEqual([], self.cache.entries())
        self.assertEqual([], self.deleted)
