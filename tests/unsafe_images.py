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

"""Images a hostile tenant would upload, made with the real qemu-img.

Each names a file of the host (``secret``, standing for ``nova.conf``) the
way the 2024 qcow2 and VMDK attacks did. The bytes of ``secret`` must never
reach an image cache or a volume.
"""

import os
import subprocess

SECRET = b'[database]\nconnection = mysql://nova:hunter2@db/nova\n' * 64


def _qemu_img(*args):
    subprocess.run(('qemu-img',) + args, check=True, capture_output=True)


def secret(directory):
    """The host file the images point at."""
    path = os.path.join(directory, 'nova.conf')
    with open(path, 'wb') as f:
        f.write(SECRET)
    return path


def backing_file(directory):
    """A qcow2 whose backing file is the host's secret."""
    path = os.path.join(directory, 'backed.qcow2')
    _qemu_img('create', '-q', '-f', 'qcow2', '-b', secret(directory),
              '-F', 'raw', path)
    return path


def data_file(directory):
    """A qcow2 whose external raw data file is the host's secret."""
    path = os.path.join(directory, 'data.qcow2')
    target = secret(directory)
    # qemu-img create truncates the data file: write the secret after.
    _qemu_img('create', '-q', '-f', 'qcow2', '-o',
              'data_file=%s,data_file_raw=on' % target, path,
              str(len(SECRET)))
    secret(directory)
    return path


def plain_qcow2(directory, size='1M'):
    """A harmless qcow2 (to declare as raw, or to blow up in size)."""
    path = os.path.join(directory, 'plain-%s.qcow2' % size)
    _qemu_img('create', '-q', '-f', 'qcow2', path, size)
    return path


def vmdk_descriptor(directory):
    """A VMDK descriptor whose flat extent is the host's secret."""
    path = os.path.join(directory, 'desc.vmdk')
    with open(path, 'w') as f:
        f.write('# Disk DescriptorFile\nversion=1\nCID=fffffffe\n'
                'parentCID=ffffffff\ncreateType="monolithicFlat"\n\n'
                'RW 8 FLAT "%s" 0\n\nddb.virtualHWVersion = "4"\n'
                % secret(directory))
    return path


def read(path):
    with open(path, 'rb') as f:
        return f.read()
