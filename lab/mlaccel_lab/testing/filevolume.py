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

"""A Cinder volume driver that keeps each volume as a sparse file.

Real bytes, no block devices: the test backend of the mirror-volume driver
and of the all-in-one cloud. Clones are reflinks where the file system has
them (XFS with reflink, btrfs) and sparse-aware copies otherwise. Volumes
attach through os-brick's ``local`` connector (the file's path).
"""

import os

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import units

from cinder import exception
from cinder.image import image_utils
from cinder import interface
from cinder.volume import driver

from mlaccel_lab.testing import reflink

LOG = logging.getLogger(__name__)

OPTS = [
    cfg.StrOpt(
        'mlaccel_file_volume_dir',
        default='$state_path/mlaccel-file-volumes',
        help='Directory holding one file per volume and per snapshot of '
             'the file-backed test backend. Put it on XFS with reflink or on '
             'btrfs for copy-on-write clones.'),
    cfg.BoolOpt(
        'mlaccel_file_volume_reflink',
        default=True,
        help='Clone by reflink where the file system has it. False: '
             'every clone copies the data, as on LVM or NFS backends.'),
]


@interface.volumedriver
class FileVolumeDriver(driver.VolumeDriver):
    """One sparse file per volume under ``mlaccel_file_volume_dir``.

    A volume is a local file: no target is shared, and each create says so
    in its model update, so that the row Cinder marks available already
    holds it. (Cinder records a new volume's ``shared_targets`` and
    ``service_uuid`` only after it marks it available; a Nova that attaches
    it in between reads the column's default, shared, and os-brick then
    locks on the missing service and fails the build.)
    """

    #: The model update of every volume this driver creates.
    CREATED = {'shared_targets': False}

    VERSION = '1.0.0'
    CI_WIKI_NAME = 'mlaccel'
    SUPPORTS_ACTIVE_ACTIVE = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configuration.append_config_values(OPTS)
        self.backend_name = (
            self.configuration.safe_get('volume_backend_name')
            or 'FileVolume')
        self.clones = {'reflink': 0, 'copy': 0}

    @staticmethod
    def get_driver_options():
        return OPTS

    @property
    def _dir(self):
        return self.configuration.mlaccel_file_volume_dir

    def do_setup(self, context):
        os.makedirs(self._dir, mode=0o700, exist_ok=True)

    def check_for_setup_error(self):
        if not os.access(self._dir, os.W_OK):
            raise exception.VolumeBackendAPIException(
                data='volume directory %s is not writable' % self._dir)

    def local_path(self, volume):
        return os.path.join(self._dir, volume.name)

    def _snapshot_path(self, snapshot):
        return os.path.join(self._dir, 'snapshot-%s' % snapshot.id)

    @staticmethod
    def _resize(path, size_gb):
        if os.path.getsize(path) < size_gb * units.Gi:
            os.truncate(path, size_gb * units.Gi)

    def create_volume(self, volume):
        path = self.local_path(volume)
        with open(path, 'xb'):
            pass
        os.truncate(path, volume.size * units.Gi)
        return dict(self.CREATED)

    def delete_volume(self, volume):
        self._remove(self.local_path(volume))

    @staticmethod
    def _remove(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def _clone(self, src, dst, size_gb):
        if not os.path.exists(src):
            raise exception.VolumeBackendAPIException(
                data='source file %s does not exist' % os.path.basename(src))
        try:
            how = reflink.clone_file(
                src, dst, self.configuration.mlaccel_file_volume_reflink)
            self._resize(dst, size_gb)
        except Exception:
            self._remove(dst)
            raise
        self.clones[how] += 1
        LOG.debug('%s -> %s by %s', src, dst, how)

    def create_cloned_volume(self, volume, src_vref):
        self._clone(self.local_path(src_vref), self.local_path(volume),
                    volume.size)
        return dict(self.CREATED)

    def create_snapshot(self, snapshot):
        self._clone(self.local_path(snapshot.volume),
                    self._snapshot_path(snapshot), snapshot.volume_size)

    def delete_snapshot(self, snapshot):
        self._remove(self._snapshot_path(snapshot))

    def create_volume_from_snapshot(self, volume, snapshot):
        self._clone(self._snapshot_path(snapshot), self.local_path(volume),
                    volume.size)
        return dict(self.CREATED)

    def extend_volume(self, volume, new_size):
        self._resize(self.local_path(volume), new_size)

    def copy_image_to_volume(self, context, volume, image_service, image_id,
                             disable_sparse=False):
        image_utils.fetch_to_raw(
            context, image_service, image_id, self.local_path(volume),
            self.configuration.volume_dd_blocksize, size=volume.size,
            run_as_root=False, disable_sparse=disable_sparse)
        self._resize(self.local_path(volume), volume.size)
        # Like a real backend's, the data is on disk when the copy returns.
        with open(self.local_path(volume), 'rb') as f:
            os.fsync(f.fileno())

    def copy_volume_to_image(self, context, volume, image_service,
                             image_meta):
        image_utils.upload_volume(context, image_service, image_meta,
                                  self.local_path(volume), volume,
                                  run_as_root=False)

    def initialize_connection(self, volume, connector, **kwargs):
        return {'driver_volume_type': 'local',
                'data': {'device_path': self.local_path(volume)}}

    def terminate_connection(self, volume, connector, **kwargs):
        pass

    def create_export(self, context, volume, connector):
        pass

    def ensure_export(self, context, volume):
        pass

    def remove_export(self, context, volume):
        pass

    def get_volume_stats(self, refresh=False):
        if refresh or not self._stats:
            st = os.statvfs(self._dir)
            self._stats = {
                'volume_backend_name': self.backend_name,
                'vendor_name': 'mlaccel',
                'driver_version': self.VERSION,
                'storage_protocol': 'local',
                'shared_targets': False,
                'total_capacity_gb': st.f_blocks * st.f_frsize // units.Gi,
                'free_capacity_gb': st.f_bavail * st.f_frsize // units.Gi,
                'reserved_percentage': 0,
                'thin_provisioning_support': True,
                'thick_provisioning_support': False,
                'max_over_subscription_ratio': 20.0,
                'multiattach': False,
            }
        return self._stats
