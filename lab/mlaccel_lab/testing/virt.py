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

"""A TEST virt driver: Nova's fake driver plus what runs without hypervisor.

The parts of a build that can really happen without a hypervisor. For
test clouds only.

On top of Nova's fake driver (the variant with a stable node identity),
:class:`GuestProcessDriver`

- fetches the server's image from Glance into the host's image cache in
  Nova's own layout, ``$instances_path/_base/<sha1(image id)>``, under
  nova-compute's own external lock for that file (the one the libvirt
  driver's image backend takes, ``$instances_path/locks/nova-<name>``), so
  a cache hit costs nothing, a miss is a real transfer, and a file put
  there by mlaccel-agent meanwhile is reused; a snapshot uploads that
  cached image as the server's disk;
- starts the server's *guest* as a real process on the compute host, as
  its user-data says (see :mod:`mlaccel_lab.testing.cloudinit`: files from
  ``write_files`` under a per-server guest root, then the first allowed
  command, e.g. ``mlaccel-taskd`` through its systemd unit or a cold
  ``python -m mlaccel.tasks...`` runner). The guest runs in its own session
  in the instance directory, its output is the server's console output, and
  it is stopped (SIGTERM, then SIGKILL) when the server is deleted, stopped
  or its compute service stops.

It publishes nothing: the host report is mlaccel-agent's, which reads this
cache as it reads a libvirt compute's.

The CPU, memory and disk of a server remain fake. Nova loads drivers from
inside ``nova.virt`` only: run the compute with ``python -m
mlaccel_lab.testing.compute`` and ``compute_driver =
mlaccel_testing.GuestProcessDriver``.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time

from nova.compute import task_states
from nova import exception
from nova.image import glance
from nova.virt import fake
from nova.virt import images
from nova.virt.libvirt import imagecache
from oslo_concurrency import lockutils
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel_lab.testing import cloudinit
from mlaccel_lab.testing import conf as testing_conf

LOG = logging.getLogger(__name__)
CONF = mlaccel_conf.CONF
# The test driver's options stay out of the operators' sample config.
mlaccel_conf.register_group(CONF, testing_conf)


class GuestProcessDriver(fake.FakeDriverWithoutFakeNodes):
    """TEST driver: real image cache and real guest processes.

    Its one node keeps its uuid in ``$state_path/compute_id`` like a real
    driver's, so a compute can be restarted.
    """

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self._lock = threading.Lock()
        self._guests = {}

    # image cache ---------------------------------------------------------
    @property
    def cache_dir(self):
        return os.path.join(CONF.instances_path,
                            CONF.image_cache.subdirectory_name)

    @property
    def lock_dir(self):
        """Where nova-compute keeps its external image cache locks."""
        return os.path.join(CONF.instances_path, 'locks')

    def init_host(self, host):
        super().init_host(host)
        os.makedirs(self.cache_dir, exist_ok=True)
        self._end_orphans()

    def fetch_image(self, context, image_id):
        """Make sure the image is in the cache.

        Returns True if it was fetched (a miss), False if it was already
        there (a hit). The lock is the one ``nova.virt.libvirt.
        imagebackend`` takes (``nova.utils.synchronized(filename,
        external=True, lock_path=$instances_path/locks)``), so anything
        filling the cache as nova-compute does waits for it or is waited
        for.
        """
        name = imagecache.get_cache_fname(image_id)
        path = os.path.join(self.cache_dir, name)
        with lockutils.lock(name, lock_file_prefix='nova-', external=True,
                            lock_path=self.lock_dir):
            if os.path.exists(path):
                LOG.info('Image %s is cached on this host', image_id)
                return False
            partial = path + '.part'
            started = time.monotonic()
            images.fetch(context, image_id, partial)
            os.rename(partial, path)
            seconds = time.monotonic() - started
            size = os.path.getsize(path)
            LOG.info('Fetched image %(image)s (%(size)d bytes) into the '
                     'image cache in %(sec).2f s',
                     {'image': image_id, 'size': size, 'sec': seconds})
            return True

    def cache_image(self, context, image_id):
        """Nova's pre-cache API (microversion 2.81) fills the same cache."""
        return self.fetch_image(context, image_id)

    # builds and guests -----------------------------------------------------
    def spawn(self, context, instance, image_meta, injected_files,
              admin_password, allocations, network_info=None,
              block_device_info=None, power_on=True, accel_info=None):
        if instance.image_ref:
            self.fetch_image(context, instance.image_ref)
        super().spawn(context, instance, image_meta, injected_files,
                      admin_password, allocations, network_info,
                      block_device_info, power_on, accel_info)
        if power_on:
            self._start_guest(instance)

    def instance_dir(self, instance_uuid):
        return os.path.join(CONF.instances_path, instance_uuid)

    def _start_guest(self, instance):
        directory = self.instance_dir(instance.uuid)
        root = os.path.join(directory, 'root')
        spec = cloudinit.guest(instance.user_data,
                               CONF.mlaccel_test_driver.guest_commands, root)
        if spec is None:
            LOG.debug('No guest command in the user-data', instance=instance)
            return
        os.makedirs(directory, exist_ok=True)
        for path in spec.dirs:
            os.makedirs(path, exist_ok=True)
        for path, data, mode in spec.files:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'wb') as f:
                f.write(data)
            os.chmod(path, mode)
        argv = spec.argv + _private_paths(spec.argv, root)
        env = dict(os.environ, MLACCEL_INSTANCE_UUID=instance.uuid,
                   MLACCEL_INSTANCE_DIR=directory, MLACCEL_HOST=CONF.host,
                   **spec.env)
        try:
            with open(os.path.join(directory, 'console.log'), 'ab') as log:
                proc = subprocess.Popen(
                    argv, cwd=directory, env=env, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
        except OSError as exc:
            raise exception.InstanceDeployFailure(
                reason='guest command %s could not start: %s'
                % (argv[0], exc))
        with open(os.path.join(directory, 'guest.pid'), 'w') as f:
            f.write('%d\n' % proc.pid)
        with self._lock:
            self._guests[instance.uuid] = proc
        LOG.info('Started guest pid %(pid)d: %(argv)s',
                 {'pid': proc.pid, 'argv': ' '.join(argv)}, instance=instance)

    def _stop_guest(self, instance_uuid):
        with self._lock:
            proc = self._guests.pop(instance_uuid, None)
        if proc is not None:
            _stop_group(proc.pid, CONF.mlaccel_test_driver.guest_stop_timeout,
                        proc)
            LOG.info('Stopped guest pid %(pid)d of %(uuid)s',
                     {'pid': proc.pid, 'uuid': instance_uuid})
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.instance_dir(instance_uuid),
                                   'guest.pid'))

    def _end_orphans(self):
        """Guests left by a previous run of this compute service."""
        try:
            entries = os.listdir(CONF.instances_path)
        except FileNotFoundError:
            return
        for entry in entries:
            pid_file = os.path.join(CONF.instances_path, entry, 'guest.pid')
            try:
                with open(pid_file) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue
            LOG.info('Ending guest pid %d left by a previous run', pid)
            _stop_group(pid, CONF.mlaccel_test_driver.guest_stop_timeout)
            os.unlink(pid_file)

    def snapshot(self, context, instance, image_id, update_task_state):
        """Upload the server's disk: its image, from the cache.

        The fake driver uploads nothing, so a shelved server could not come
        back on a driver that really fetches images.
        """
        if instance.uuid not in self.instances:
            raise exception.InstanceNotRunning(instance_id=instance.uuid)
        update_task_state(task_state=task_states.IMAGE_PENDING_UPLOAD)
        if instance.image_ref:
            self.fetch_image(context, instance.image_ref)
            source = os.path.join(
                self.cache_dir, imagecache.get_cache_fname(instance.image_ref))
        else:
            source = os.devnull
        snapshot = images.IMAGE_API.get(context, image_id)
        metadata = {'status': 'active', 'name': snapshot['name'],
                    'disk_format': 'raw', 'container_format': 'bare',
                    'properties': {'image_location': 'snapshot',
                                   'image_state': 'available',
                                   'owner_id': instance.project_id}}
        update_task_state(task_state=task_states.IMAGE_UPLOADING,
                          expected_state=task_states.IMAGE_PENDING_UPLOAD)
        images.IMAGE_API.update(context, image_id, metadata)
        _upload(context, image_id, source)

    def get_console_output(self, context, instance):
        path = os.path.join(self.instance_dir(instance.uuid), 'console.log')
        try:
            with open(path, 'rb') as f:
                f.seek(max(0, os.path.getsize(path) - 100 * 1024))
                return f.read()
        except FileNotFoundError:
            return super().get_console_output(context, instance)

    def power_off(self, instance, timeout=0, retry_interval=0):
        super().power_off(instance, timeout, retry_interval)
        self._stop_guest(instance.uuid)

    def power_on(self, context, instance, network_info,
                 block_device_info=None, accel_info=None, share_info=None):
        super().power_on(context, instance, network_info, block_device_info,
                         accel_info, share_info)
        with self._lock:
            running = instance.uuid in self._guests
        if not running:
            self._start_guest(instance)

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        self._stop_guest(instance.uuid)
        super().destroy(context, instance, network_info, block_device_info,
                        destroy_disks, destroy_secrets)
        if destroy_disks:
            shutil.rmtree(self.instance_dir(instance.uuid),
                          ignore_errors=True)

    def cleanup_host(self, host):
        """The compute service stops: so do its guests."""
        with self._lock:
            uuids = list(self._guests)
        for uuid in uuids:
            self._stop_guest(uuid)
        super().cleanup_host(host)

    def get_available_resource(self, nodename):
        """Nova's periodic resource update; also reaps ended guests."""
        self._reap()
        return super().get_available_resource(nodename)

    def _reap(self):
        """Collect guests that ended by themselves (no zombies)."""
        with self._lock:
            procs = list(self._guests.values())
        for proc in procs:
            proc.poll()


def _upload(context, image_id, path):
    """PUT the file as the image's data, with its length.

    Nova's Glance client always sends chunked bodies, which Glance served
    by uWSGI in the test cloud cannot read; a plain PUT works anywhere.
    """
    session, auth = glance._session_and_auth(context)
    endpoint = next(glance.get_api_servers(context)).rstrip('/')
    with open(path, 'rb') as data:
        session.put('%s/v2/images/%s/file' % (endpoint, image_id),
                    data=data, auth=auth,
                    headers={'Content-Type': 'application/octet-stream'})


def _private_paths(argv, root):
    """Give an mlaccel-taskd guest its own socket and task logs.

    Each VM has its own /run and /var/log; guests sharing this host must not
    share mlaccel-taskd's default socket path, so the daemon is pointed
    into its guest root unless the command line already chose.
    """
    if os.path.basename(argv[0]) != 'mlaccel-taskd' or '--socket' in argv:
        return []
    os.makedirs(os.path.join(root, 'run', 'mlaccel'), exist_ok=True)
    # Relative to the guest's working directory, the instance directory: an
    # absolute path there can pass the 108 bytes a Unix socket path allows.
    socket = os.path.join(os.path.basename(root), 'run', 'mlaccel',
                          'taskd.sock')
    return ['--socket', socket, '--task-log-dir',
            os.path.join(root, 'var', 'log', 'mlaccel', 'tasks')]


def _stop_group(pid, timeout, proc=None):
    """SIGTERM a guest's process group, SIGKILL it after ``timeout``."""
    def alive():
        if proc is not None:
            return proc.poll() is None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
        deadline = time.monotonic() + timeout
        while alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not alive():
            break
    # Children the guest left behind share its process group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
