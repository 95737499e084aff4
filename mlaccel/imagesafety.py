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

"""Inspect a tenant's image before anything converts, caches or clones it.

The checks Nova, Cinder and Glance run since the 2024 qcow2 and VMDK
vulnerabilities (OSSA-2024-001, Nova bug 2059809), with oslo.utils' format
inspector: the content's real format is detected without qemu, must pass
that format's safety check (no backing file, no external data file, no VMDK
descriptor naming other files, no unknown qcow2 features) and must match
the ``disk_format`` Glance declares, a GPT disk declared raw being the one
tolerated difference (as in ``nova.virt.images.do_image_deep_inspection``).
qemu-img, when it runs at all, runs after that, with an explicit input
format and under resource limits.
"""

import dataclasses
import io
import json
import os
import sys

from oslo_concurrency import processutils
from oslo_utils.imageutils import format_inspector

#: Formats Glance may declare for bytes qemu treats as raw.
AMI_FORMATS = ('ami', 'aki', 'ari')

#: Bytes read at a time while detecting a format.
CHUNK = 4096

#: ``qemu-img info``'s limits, Nova's and Cinder's: 30 s of CPU, 1 GiB of
#: address space, so a crafted header cannot exhaust the host.
INFO_LIMITS = processutils.ProcessLimits(cpu_time=30, address_space=1 << 30)

#: ``qemu-img convert``'s address space limit (its CPU is bounded by the
#: caller's deadline instead: a large image legitimately takes minutes).
CONVERT_LIMITS = processutils.ProcessLimits(address_space=1 << 30)


class UnsafeImage(Exception):
    """The image is refused: its content is unsafe or not what it claims."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """An image that passed inspection.

    :ivar detected: the format the inspector found (``gpt``, ``qcow2``...).
    :ivar qemu_format: the format to give qemu-img's ``-f``.
    :ivar virtual_size: bytes of the disk the image holds.
    """

    detected: str
    qemu_format: str
    virtual_size: int


def _detect(stream):
    """The one inspector that matches ``stream`` (read from its start)."""
    wrapper = format_inspector.InspectWrapper(stream)
    try:
        while wrapper.read(CHUNK):
            if wrapper.formats:
                break
    finally:
        wrapper.close()
    try:
        return wrapper.format
    except format_inspector.ImageFormatError:
        # A bootable ISO may carry a GPT in front: Nova allows it as ISO.
        matches = wrapper.formats or []
        if {str(m) for m in matches} == {'iso', 'gpt'}:
            return [m for m in matches if str(m) == 'iso'][0]
        raise


def inspect(stream, disk_format, image_id, size=None):
    """Inspect the image read from ``stream``; returns a :class:`Verdict`.

    :param stream: a binary file object positioned at the image's start;
        it is read only as far as detection needs, then closed.
    :param disk_format: what Glance says the image is.
    :param size: the image's bytes, the virtual size of a raw image.
    :raises UnsafeImage: with the reason.
    """
    if disk_format not in AMI_FORMATS and \
            format_inspector.get_inspector(disk_format) is None:
        raise UnsafeImage('image %s: disk_format %r cannot be inspected, '
                          'so it is not trusted' % (image_id, disk_format))
    try:
        inspector = _detect(stream)
        inspector.safety_check()
    except format_inspector.SafetyCheckFailed as exc:
        raise UnsafeImage('image %s fails the %s safety check: %s'
                          % (image_id, inspector, exc))
    except format_inspector.ImageFormatError as exc:
        raise UnsafeImage('image %s: its format cannot be told: %s'
                          % (image_id, exc))
    detected = str(inspector)
    tolerated = disk_format in AMI_FORMATS or detected == disk_format or (
        disk_format == 'raw' and detected == 'gpt')
    if not tolerated:
        raise UnsafeImage('image %s is declared %s but holds %s'
                          % (image_id, disk_format, detected))
    if detected in ('raw', 'gpt', 'iso') or disk_format in AMI_FORMATS:
        return Verdict(detected, 'raw', size if size is not None
                       else inspector.actual_size)
    return Verdict(detected, detected, inspector.virtual_size)


def inspect_file(path, disk_format, image_id):
    """:func:`inspect` for a file; a raw image's virtual size is its size."""
    with open(path, 'rb') as f:
        return inspect(f, disk_format, image_id,
                       size=os.fstat(f.fileno()).st_size)


def inspect_prefix(data, disk_format, image_id):
    """:func:`inspect` for the first bytes of a stream.

    Every format's header lies within the first MiB, so a prefix of that
    length tells a disguised image from a raw one.
    """
    return inspect(io.BytesIO(data), disk_format, image_id, size=len(data))


def limited(command, limits):
    """``command`` run under ``limits``, the way oslo.concurrency runs it."""
    return [sys.executable, '-m', 'oslo_concurrency.prlimit',
            *limits.prlimit_args(), '--', *command]


def qemu_agrees(path, verdict, image_id, qemu_img='qemu-img'):
    """Second opinion, as Nova's ``fetch_to_raw``: qemu-img info must agree.

    :raises UnsafeImage: qemu sees another format, a backing file or an
        external data file, or cannot read the image within its limits.
    """
    try:
        out, _err = processutils.execute(
            *limited([qemu_img, 'info', '-f', verdict.qemu_format,
                      '--output=json', path], INFO_LIMITS))
        info = json.loads(out)
    except (OSError, ValueError, processutils.ProcessExecutionError) as exc:
        raise UnsafeImage('image %s: qemu-img info failed under its limits: '
                          '%s' % (image_id, exc))
    specific = (info.get('format-specific') or {}).get('data') or {}
    if info.get('format') != verdict.qemu_format:
        raise UnsafeImage('image %s: qemu sees %s, the inspector %s'
                          % (image_id, info.get('format'),
                             verdict.qemu_format))
    if info.get('backing-filename') or specific.get('data-file'):
        raise UnsafeImage('image %s names a backing or data file'
                          % image_id)
