"""The mirror-volume driver on Cinder's in-process harness."""

from tests.functional.cinder import base

MIB = base.MIB


class MirrorTest(base.MirrorTestBase):

    def test_first_request_downloads_once_then_clones(self):
        image = self.images.add(base.image_bytes('a', 3 * MIB))
        first = self.wait(self.create(image['id']))
        self.assertEqual('available', first['status'])
        second = self.wait(self.create(image['id']))
        self.assertEqual('available', second['status'])
        self.assertEqual(1, self.images.downloads[image['id']])
        self.assertHoldsImage(first['id'], image['id'])
        self.assertHoldsImage(second['id'], image['id'])
        self.assertEqual(1, len(self.golden_rows()))
        self.assertEqual(1, self.mirror.stats['hit'])
        self.assertEqual(1, self.mirror.stats['miss'])
