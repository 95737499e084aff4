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

"""Copy-on-write file clones (reflinks) and a file system that has them.

What the file-backed test volumes (:mod:`.filevolume`), the Cinder
benchmark and the all-in-one cloud clone with; Cinder-free, so that the
cloud's own tooling can use it next to Nova's options.
"""

import contextlib
import errno
import fcntl
import os
import shutil
import subprocess
import tempfile

from oslo_utils import units

FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h


def clone_file(src, dst, reflink=True):
    """Copy ``src`` to a new file ``dst``; return how: reflink or copy.

    A reflink shares the blocks (copy-on-write). Otherwise, or with
    ``reflink=False``, only the data extents are copied, so holes stay
    holes.
    """
    with open(src, 'rb') as fin, open(dst, 'wb') as fout:
        try:
            if reflink:
                fcntl.ioctl(fout.fileno(), FICLONE, fin.fileno())
                return 'reflink'
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV,
                               errno.EINVAL, errno.ENOSYS):
                raise
        size = os.fstat(fin.fileno()).st_size
        _copy_data(fin.fileno(), fout.fileno(), size)
        os.ftruncate(fout.fileno(), size)
        return 'copy'


def has_reflink(directory):
    """Whether files in ``directory`` can be reflinked."""
    with tempfile.TemporaryDirectory(dir=directory) as d:
        src, dst = os.path.join(d, 'a'), os.path.join(d, 'b')
        with open(src, 'wb') as f:
            f.write(b'x' * 4096)
        return clone_file(src, dst) == 'reflink'


@contextlib.contextmanager
def reflink_dir(base, size_gb=64):
    """A directory where clones are reflinks, if one can be had.

    ``base`` itself if its file system has reflink; otherwise, as root, a
    new XFS file system with reflink (``mkfs.xfs -m reflink=1``, from
    xfsprogs) in a sparse file under ``base``, loop-mounted for the
    duration. Yields ``(directory, description)``; when no reflink can be
    had, ``directory`` is a plain temporary directory under ``base`` and the
    description says why.
    """
    if has_reflink(base):
        with tempfile.TemporaryDirectory(dir=base) as d:
            yield d, 'reflink (the file system of %s has it)' % base
        return
    with tempfile.TemporaryDirectory(dir=base) as d:
        mnt = os.path.join(d, 'mnt')
        os.mkdir(mnt)
        device, why = mount_xfs(os.path.join(d, 'xfs.img'), mnt, size_gb)
        if why is not None:
            yield d, 'plain copies (%s)' % why
            return
        try:
            yield mnt, 'reflink (XFS on loop device %s)' % device
        finally:
            unmount(mnt)


def mount_xfs(image, mnt, size_gb):
    """Mount a new XFS with reflink, in the sparse file ``image``, on ``mnt``.

    :returns: ``(loop device, None)``, or ``(None, why not)`` with nothing
        left mounted.
    """
    if os.geteuid() != 0:
        return None, ('not root: cannot mount an XFS file system on a loop '
                      'device')
    if shutil.which('mkfs.xfs') is None:
        return None, 'mkfs.xfs not found (install xfsprogs)'
    with open(image, 'wb') as f:
        f.truncate(size_gb * units.Gi)
    # Direct I/O on the loop device: written data reaches the disk instead
    # of lingering in the page cache of the file below, as on a real disk.
    steps = (['mkfs.xfs', '-q', '-m', 'reflink=1', image],
             ['losetup', '--find', '--show', '--direct-io=on', image])
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode:
            return None, _failed(argv, done)
    device = done.stdout.strip()
    argv = ['mount', '-o', 'discard', device, mnt]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        subprocess.run(['losetup', '--detach', device], check=False)
        return None, _failed(argv, done)
    if not has_reflink(mnt):
        unmount(mnt)
        return None, 'the XFS made has no reflink'
    return device, None


def unmount(mnt):
    """Unmount ``mnt`` and free its loop device."""
    subprocess.run(['umount', '--detach-loop', mnt], check=False)


def _failed(argv, done):
    lines = (done.stderr or done.stdout).strip().splitlines()
    return '%s failed: %s' % (
        argv[0], lines[-1] if lines else 'exit %d' % done.returncode)


def _copy_data(fin, fout, size):
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fin, offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole is left
                return
            raise
        end = os.lseek(fin, start, os.SEEK_HOLE)
        pos = start
        while pos < end:
            n = os.copy_file_range(fin, fout, end - pos, pos, pos)
            if n == 0:
                raise IOError('short copy at offset %d' % pos)
            pos += n
        offset = end
