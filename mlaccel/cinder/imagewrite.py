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

"""Write an image's bytes, as they stream in, into a new volume's file.

:func:`open_sink` gives a file-like sink for ``image_service.download``.
Where the file system takes direct I/O it is :class:`DirectWriter`: the
data bypasses the page cache (O_DIRECT), as Cinder's own image copy writes
volumes (``qemu-img convert -t none``), so it is on disk when the last
write returns and nothing is left dirty to slow the clones that follow.
Elsewhere it is :class:`SparseWriter`, buffered, and :meth:`close` syncs
the file. Both skip runs of zeros (the file stays sparse): the file must be
a new volume, all zeros, at least as long as the image.

:class:`RawOnly` wraps a sink and holds the stream's first MiB back until
:mod:`mlaccel.imagesafety` has seen it: an image declared raw that holds
another format (a qcow2 naming a host file as its backing file) never
reaches the volume.
"""

import errno
import functools
import mmap
import os
import tempfile

from mlaccel import imagesafety

#: Direct I/O alignment of offsets, lengths and buffers (any logical block
#: size up to 4 KiB).
ALIGN = 4096
#: Bytes a direct writer gathers before one write.
BUFFER = 4 * 1024 * 1024
#: Bytes of a raw stream inspected before any is written.
PREFIX = 1024 * 1024


def is_zero(data):
    """Whether ``data`` (bytes-like) holds only zero bytes.

    One comparison of bytes (memcmp), which stops at the first byte that is
    not zero; other buffers are copied to bytes first.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    return data == _zeros(len(data))


@functools.lru_cache(maxsize=8)
def _zeros(length):
    return bytes(length)


class SparseWriter:
    """Buffered writes that seek over chunks of zeros; fsync on close."""

    def __init__(self, f):
        self.f = f

    def write(self, chunk):
        if is_zero(chunk):
            self.f.seek(len(chunk), os.SEEK_CUR)
        else:
            self.f.write(chunk)

    def close(self):
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


class DirectWriter:
    """Writes whole aligned buffers with O_DIRECT, skipping those of zeros.

    :param fd: the file, opened with ``os.O_DIRECT``; closed by
        :meth:`close`, which writes the last partial buffer padded with
        zeros to the alignment (the file is zeros there already).
    """

    def __init__(self, fd, size=BUFFER):
        self.fd = fd
        self._buf = mmap.mmap(-1, size)     # page-aligned
        self._view = memoryview(self._buf)
        self._used = 0
        self._offset = 0
        self._data = False      # the buffer holds a byte that is not zero

    def write(self, chunk):
        # Judged whole (no copy of bytes): a buffer that takes a part of
        # a chunk that is not all zeros is written.
        zero = is_zero(chunk)
        chunk = memoryview(chunk).cast('B')
        while len(chunk):
            self._data = self._data or not zero
            n = min(len(chunk), len(self._buf) - self._used)
            self._view[self._used:self._used + n] = chunk[:n]
            self._used += n
            chunk = chunk[n:]
            if self._used == len(self._buf):
                self._flush()

    def _flush(self):
        length = -(-self._used // ALIGN) * ALIGN
        self._view[self._used:length] = bytes(length - self._used)
        block = self._view[:length]
        if self._data:
            done = 0
            while done < length:
                done += os.pwrite(self.fd, block[done:],
                                  self._offset + done)
        self._offset += length
        self._used = 0
        self._data = False

    def close(self):
        try:
            if self._used:
                self._flush()
            os.fsync(self.fd)     # the file's metadata
        finally:
            self._view.release()
            self._buf.close()
            os.close(self.fd)


def direct_io(directory):
    """Whether files in ``directory`` can be opened for direct I/O."""
    fd, path = tempfile.mkstemp(dir=directory)
    os.close(fd)
    try:
        sink = open_sink(path)
        sink.close()
        return isinstance(sink, DirectWriter)
    finally:
        os.unlink(path)


def open_sink(path):
    """A writer into the file at ``path``: direct where it can be."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, 'O_DIRECT', 0))
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    else:
        if hasattr(os, 'O_DIRECT'):
            return DirectWriter(fd)
        os.close(fd)
    return SparseWriter(open(path, 'r+b'))


class RawOnly:
    """A sink that writes a stream only once its first bytes are raw.

    The first :data:`PREFIX` bytes (or the whole image, if shorter: see
    :meth:`finish`) are kept until :func:`mlaccel.imagesafety.
    inspect_prefix` passes them; then they and the rest go to ``sink``.

    :raises imagesafety.UnsafeImage: from :meth:`write` or :meth:`finish`,
        with nothing written.
    """

    def __init__(self, sink, image_id):
        self.sink = sink
        self.image_id = image_id
        self._held = []
        self._held_bytes = 0

    def write(self, chunk):
        if self._held is None:
            self.sink.write(chunk)
            return
        self._held.append(bytes(chunk))
        self._held_bytes += len(chunk)
        if self._held_bytes >= PREFIX:
            self.finish()

    def finish(self):
        """The stream ended: inspect what is held, if not done yet."""
        if self._held is None:
            return
        held, self._held = self._held, None
        imagesafety.inspect_prefix(b''.join(held), 'raw', self.image_id)
        for chunk in held:
            self.sink.write(chunk)
