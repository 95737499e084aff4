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

import os
import tempfile

import fixtures

from mlaccel.cinder import imagewrite
from mlaccel import imagesafety

from tests import testcase
from tests import unsafe_images

MIB = 1024 * 1024


def _image():
    """Bytes with runs of zeros longer than a direct writer's buffer."""
    data = os.urandom(MIB + 5)
    return (data + bytes(9 * MIB) + data[:3 * MIB // 2] + bytes(77)
            + b'\x01')


class IsZeroTest(testcase.TestCase):

    def test_cases(self):
        self.assertTrue(imagewrite.is_zero(b''))
        self.assertTrue(imagewrite.is_zero(bytes(MIB)))
        self.assertTrue(imagewrite.is_zero(memoryview(bytearray(3000))))
        self.assertFalse(imagewrite.is_zero(bytes(MIB - 1) + b'\x01'))
        self.assertFalse(imagewrite.is_zero(b'\x01' + bytes(10)))


class WriterTest(testcase.TestCase):
    """Both writers on a real file.

    The direct one where the directory's file system takes O_DIRECT
    (skipped otherwise, with the reason).
    """

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'volume')
        self.size = 16 * MIB
        with open(self.path, 'wb') as f:
            f.truncate(self.size)

    def write(self, sink, data, chunk):
        for start in range(0, len(data), chunk):
            sink.write(data[start:start + chunk])
        sink.close()

    def assertHolds(self, data):
        with open(self.path, 'rb') as f:
            got = f.read()
        self.assertEqual(self.size, len(got))
        self.assertEqual(data, got[:len(data)])
        self.assertTrue(imagewrite.is_zero(got[len(data):]))

    def direct(self):
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_DIRECT)
        except OSError as e:
            self.skipTest('no O_DIRECT in %s: %s' % (self.dir, e))
        return imagewrite.DirectWriter(fd)

    def test_direct_writer_odd_chunks(self):
        data = _image()
        self.write(self.direct(), data, 65537)
        self.assertHolds(data)
        # The buffers of zeros were skipped: the file stays sparse.
        self.assertLess(os.stat(self.path).st_blocks * 512, 8 * MIB)

    def test_direct_writer_chunks_larger_than_its_buffer(self):
        data = _image()
        self.write(self.direct(), data, 5 * MIB + 3)
        self.assertHolds(data)

    def test_direct_writer_empty(self):
        self.write(self.direct(), b'', 1)
        self.assertHolds(b'')

    def test_sparse_writer(self):
        data = _image()
        self.write(imagewrite.SparseWriter(open(self.path, 'r+b')), data,
                   MIB)
        self.assertHolds(data)
        self.assertLess(os.stat(self.path).st_blocks * 512, 8 * MIB)

    def test_open_sink_writes_the_file(self):
        data = _image()
        self.write(imagewrite.open_sink(self.path), data, MIB)
        self.assertHolds(data)

    def test_open_sink_without_direct_io(self):
        shm = '/dev/shm'
        if not os.path.isdir(shm):
            self.skipTest('no tmpfs at %s' % shm)
        with tempfile.NamedTemporaryFile(dir=shm) as f:
            f.truncate(MIB)
            try:
                os.close(os.open(f.name, os.O_WRONLY | os.O_DIRECT))
            except OSError:
                sink = imagewrite.open_sink(f.name)
                self.assertIsInstance(sink, imagewrite.SparseWriter)
                sink.write(b'abc')
                sink.close()
                self.assertEqual(b'abc', f.read(3))
            else:
                self.skipTest('%s takes O_DIRECT' % shm)


class ListSink:
    """Keeps what it is given."""

    def __init__(self):
        self.chunks = []

    def write(self, chunk):
        self.chunks.append(chunk)


class RawOnlyTest(testcase.TestCase):
    """Only raw bytes reach the volume; images made by the real qemu-img."""

    def setUp(self):
        super().setUp()
        self.sink = ListSink()

    def stream(self, data, size=65536):
        raw = imagewrite.RawOnly(self.sink, 'img')
        for i in range(0, len(data), size):
            raw.write(data[i:i + size])
        raw.finish()
        return b''.join(self.sink.chunks)

    def test_raw_passes_unchanged(self):
        data = os.urandom(3 * imagewrite.PREFIX + 5)
        self.assertEqual(data, self.stream(data))

    def test_short_raw_written_when_the_stream_ends(self):
        data = os.urandom(1000)
        self.assertEqual(data, self.stream(data))

    def test_qcow2_declared_raw_writes_nothing(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        data = unsafe_images.read(unsafe_images.backing_file(tmp))
        exc = self.assertRaises(imagesafety.UnsafeImage, self.stream, data)
        self.assertIn('qcow2 safety check', str(exc))
        self.assertEqual([], self.sink.chunks)

    def test_large_qcow2_declared_raw_stops_after_the_prefix(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        head = unsafe_images.read(unsafe_images.plain_qcow2(tmp))
        data = head + os.urandom(2 * imagewrite.PREFIX)
        exc = self.assertRaises(imagesafety.UnsafeImage, self.stream, data)
        self.assertIn('declared raw but holds qcow2', str(exc))
        self.assertEqual([], self.sink.chunks)
