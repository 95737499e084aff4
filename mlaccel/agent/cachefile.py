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

"""Put one verified image file into Nova's image cache.

The file gets exactly the name nova-compute looks for
(:func:`mlaccel.agent.inventory.cache_name`) and the format it would have
written: raw when ``force_raw_images`` is set and the image is in another
disk format (converted with ``qemu-img`` as nova-compute does), the image's
own bytes otherwise. The work happens under nova-compute's own external
lock for that file (``$instances_path/locks/nova-<name>``), so a build that
needs the image meanwhile waits and then reuses it instead of downloading
it a second time.

Bytes go to a temporary file whose name starts with
:data:`~mlaccel.agent.inventory.TEMP_PREFIX`. Nova takes a file in its
cache for one it checked itself, so none of its image checks run on it
again: the file is inspected as Nova's ``fetch_to_raw`` inspects a
download (:mod:`mlaccel.imagesafety`: real format, safety check, match with
Glance's ``disk_format``, qemu-img's second opinion) before anything
converts it, and the conversion is bounded by the inspected virtual size
and the headroom. Only a complete file whose size and Glance hash match and
that passed inspection is renamed to its final name. Anything else is
deleted before :func:`write` returns or raises, and the temporaries of a
killed agent are removed at its next start.
"""

import dataclasses
import hashlib
import os
import shutil
import subprocess
import time

from oslo_concurrency import lockutils

from mlaccel.agent import inventory
from mlaccel import imagesafety

#: Bytes written between two checks of the file system's free space.
CHECK_EVERY = 64 * 1024 * 1024

#: Seconds between two checks of a running conversion.
CONVERT_POLL = 0.5

#: Seconds a conversion may take.
CONVERT_TIMEOUT = 3600


class FetchFailed(Exception):
    """The image was not cached; nothing was left behind."""


class NoRoom(FetchFailed):
    """The fetch would leave less free space than the headroom."""


class Abandoned(FetchFailed):
    """The agent is stopping or the fetch took too long."""


class Corrupt(FetchFailed):
    """The bytes do not match the image's size or hash."""


class Unsafe(FetchFailed):
    """The image failed inspection: it is left to nova-compute's checks."""


@dataclasses.dataclass(frozen=True)
class ImageMeta:
    """What Glance says of an image, as far as the cache needs it.

    :ivar size: bytes of the image data (``None``: unknown).
    :ivar virtual_size: bytes of the disk it holds (``None``: unknown).
    :ivar hash_algo: Glance's ``os_hash_algo`` (e.g. ``sha512``).
    :ivar hash_value: Glance's ``os_hash_value`` (hex).
    :ivar checksum: Glance's legacy MD5 ``checksum``, used only without
        ``os_hash_value``.
    :ivar owner: the project that owns the image.
    :ivar visibility: Glance's ``visibility`` (``public``, ``shared``...).
    """

    id: str
    size: object = None
    disk_format: str = 'raw'
    virtual_size: object = None
    hash_algo: str = ''
    hash_value: str = ''
    checksum: str = ''
    name: str = ''
    owner: str = ''
    visibility: str = ''

    @classmethod
    def from_glance(cls, image):
        """From an openstacksdk ``Image`` (or a dict of its fields)."""
        get = image.get if isinstance(image, dict) else \
            (lambda key, default=None: getattr(image, key, default))
        return cls(id=get('id'), size=get('size'), name=get('name') or '',
                   disk_format=get('disk_format') or 'raw',
                   virtual_size=get('virtual_size'),
                   hash_algo=get('hash_algo') or get('os_hash_algo') or '',
                   hash_value=get('hash_value') or get('os_hash_value') or '',
                   checksum=get('checksum') or '',
                   owner=get('owner') or get('owner_id') or '',
                   visibility=get('visibility') or '')

    def needs_conversion(self, force_raw):
        return force_raw and self.disk_format not in ('raw', 'iso')

    def bytes_needed(self, force_raw):
        """Disk space the fetch takes at its peak."""
        size = self.size or 0
        if self.needs_conversion(force_raw):
            size += self.virtual_size or size
        return size

    def hasher(self):
        """``(hash object, expected hex)``; raises Corrupt without one."""
        if self.hash_value:
            try:
                return hashlib.new(self.hash_algo or 'sha512'), \
                    self.hash_value.lower()
            except ValueError:
                raise Corrupt('image %s: unknown os_hash_algo %r'
                              % (self.id, self.hash_algo))
        if self.checksum:
            return hashlib.md5(usedforsecurity=False), self.checksum.lower()
        raise Corrupt('image %s has neither os_hash_value nor checksum in '
                      'Glance: it cannot be verified, so it is not '
                      'pre-fetched' % self.id)


@dataclasses.dataclass(frozen=True)
class Written:
    """A completed fetch: bytes downloaded and seconds it took."""

    path: str
    downloaded: int
    seconds: float


def write(settings, image, open_chunks, headroom, stopping=None,
          timeout=None, qemu_img='qemu-img'):
    """Download ``image`` into the cache unless it is there already.

    :param settings: :class:`~mlaccel.agent.novaconf.NovaSettings`.
    :param image: :class:`ImageMeta`.
    :param open_chunks: called once the lock is held; returns an iterable
        of byte chunks (the download).
    :param headroom: bytes of the file system that must stay free.
    :param stopping: a ``threading.Event``; set, the download is abandoned.
    :param timeout: seconds the download may take.
    :returns: :class:`Written`, or ``None`` if the image was cached.
    :raises FetchFailed: (a subclass) with the reason; nothing is left.
    """
    name = inventory.cache_name(image.id)
    final = os.path.join(settings.cache_dir, name)
    os.makedirs(settings.cache_dir, exist_ok=True)
    os.makedirs(settings.lock_dir, exist_ok=True)
    with lockutils.lock(name, lock_file_prefix='nova-', external=True,
                        lock_path=settings.lock_dir):
        if os.path.exists(final):
            return None
        need = image.bytes_needed(settings.force_raw)
        _check_room(settings.cache_dir, need, headroom, image)
        temp = os.path.join(settings.cache_dir, '%s%s.%d.part' % (
            inventory.TEMP_PREFIX, name, os.getpid()))
        converted = temp[:-len('.part')] + '.converted'
        try:
            started = time.monotonic()
            downloaded = _download(settings.cache_dir, image, open_chunks,
                                   temp, headroom, stopping,
                                   None if timeout is None
                                   else started + timeout)
            seconds = time.monotonic() - started
            verdict = _inspect(image, temp, qemu_img)
            source = temp
            if settings.force_raw and verdict.qemu_format != 'raw':
                _check_room(settings.cache_dir, verdict.virtual_size,
                            headroom, image)
                _convert(qemu_img, image, verdict, temp, converted,
                         headroom, stopping)
                source = converted
            os.chmod(source, 0o644)
            os.rename(source, final)
            _sync_dir(settings.cache_dir)
            return Written(final, downloaded, seconds)
        finally:
            for path in (temp, converted):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass


def _check_room(directory, need, headroom, image):
    free = shutil.disk_usage(directory).free
    if free - need < headroom:
        raise NoRoom('image %s needs %d bytes but only %d are free above '
                     'the headroom of %d' % (image.id, need,
                                             max(0, free - headroom),
                                             headroom))


def _download(directory, image, open_chunks, temp, headroom, stopping,
              deadline):
    hasher, expected = image.hasher()
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    written = unchecked = 0
    with os.fdopen(fd, 'wb') as out:
        chunks = open_chunks()
        try:
            for chunk in chunks:
                _check_going(image, stopping, deadline, 'download')
                out.write(chunk)
                hasher.update(chunk)
                written += len(chunk)
                unchecked += len(chunk)
                if unchecked >= CHECK_EVERY:
                    unchecked = 0
                    if shutil.disk_usage(directory).free < headroom:
                        raise NoRoom('image %s: the file system filled past '
                                     'the headroom during the download'
                                     % image.id)
        finally:
            close = getattr(chunks, 'close', None)
            if close is not None:
                close()
        out.flush()
        os.fsync(out.fileno())
    if image.size is not None and written != image.size:
        raise Corrupt('image %s: got %d bytes, Glance says %d (truncated '
                      'download); discarded' % (image.id, written,
                                                image.size))
    if hasher.hexdigest() != expected:
        raise Corrupt('image %s: the %s of the download does not match '
                      'Glance\'s; discarded' % (image.id, hasher.name))
    return written


def _check_going(image, stopping, deadline, what):
    if stopping is not None and stopping.is_set():
        raise Abandoned('image %s: the agent is stopping' % image.id)
    if deadline is not None and time.monotonic() > deadline:
        raise Abandoned('image %s: the %s took too long' % (image.id, what))


def _inspect(image, path, qemu_img):
    try:
        verdict = imagesafety.inspect_file(path, image.disk_format, image.id)
        imagesafety.qemu_agrees(path, verdict, image.id, qemu_img=qemu_img)
    except imagesafety.UnsafeImage as exc:
        raise Unsafe('%s; discarded' % exc)
    return verdict


def _convert(qemu_img, image, verdict, source, target, headroom, stopping):
    """qemu-img convert to raw, as nova-compute does, under limits.

    The output is at most the inspected virtual size (checked against the
    headroom before); the free space is watched while it grows.
    """
    deadline = time.monotonic() + CONVERT_TIMEOUT
    command = imagesafety.limited(
        [qemu_img, 'convert', '-q', '-f', verdict.qemu_format, '-O', 'raw',
         source, target], imagesafety.CONVERT_LIMITS)
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        raise FetchFailed('image %s: cannot run qemu-img: %s'
                          % (image.id, exc))
    try:
        while True:
            try:
                _out, err = proc.communicate(timeout=CONVERT_POLL)
                break
            except subprocess.TimeoutExpired:
                pass
            _check_going(image, stopping, deadline, 'conversion')
            if shutil.disk_usage(os.path.dirname(target)).free < headroom:
                raise NoRoom('image %s: the file system filled past the '
                             'headroom during the conversion' % image.id)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate()
    if proc.returncode:
        raise FetchFailed('image %s: cannot convert %s to raw as '
                          'nova-compute would (force_raw_images): exit %d %s'
                          % (image.id, verdict.qemu_format, proc.returncode,
                             err.decode(errors='replace').strip()))


def _sync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
