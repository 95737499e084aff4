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

"""A fake hypervisor whose guests are real, local mlaccel-taskd processes.

Nova's fake driver boots nothing, so no task daemon could ever push its
readiness. :class:`TaskdGuestDriver` keeps the fake driver's bookkeeping and,
when a server is spawned, does what cloud-init does in a real guest, the
way the test cloud's driver does (:mod:`mlaccel_lab.testing.cloudinit`): it
writes the files of the server's user-data (made by
``mlaccel.taskd.guest.user_data``: taskd's configuration, the VM's token,
its TLS certificate and key, the launcher's certificate) under a guest root
of its own, with their modes, and starts the daemon of the unit the
user-data enables. Deleting the server stops that process. Three changes
make several "guests" fit on one host and run the test tasks: each daemon
binds TCP on ``127.0.0.1`` with a free port (it reports the port in its
readiness push), gets its own socket and log directory, and a second
configuration file, the image's, allows :data:`TASKS`.

Faults are injected by name: a server whose name is in ``FAIL_SPAWN`` fails
to spawn the way a hypervisor error does (build aborted, server ERROR); one
whose name is in ``SILENT_SPAWN`` becomes ACTIVE but its guest never starts
(a boot that hangs before the daemon runs).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading

from nova import exception
from nova.virt import fake

from mlaccel_lab.testing import cloudinit

#: Root of the repository: the guests import the test tasks from it.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: The tasks the guests' image allows besides the registered ones.
TASKS = 'tests.functional.launcher.tasks:*'
#: Names of servers whose spawn fails (set by tests).
FAIL_SPAWN = set()
#: Names of servers whose guest never starts (set by tests).
SILENT_SPAWN = set()
#: uuid -> (Popen, work directory) of the running guests.
GUESTS = {}
_LOCK = threading.Lock()


def boot(instance_uuid, user_data):
    """Do what cloud-init would with the launcher's (base64) user-data."""
    root = tempfile.mkdtemp(prefix='guest-')
    spec = cloudinit.guest(user_data, ['mlaccel-taskd'], root)
    if spec is None:
        shutil.rmtree(root)
        raise ValueError('user-data does not start mlaccel-taskd')
    for path, data, mode in spec.files:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, 'wb') as stream:
            stream.write(data)
    for path in spec.dirs:
        os.makedirs(path, exist_ok=True)
    image_conf = os.path.join(root, 'image.conf')
    with open(image_conf, 'w') as stream:
        stream.write('[mlaccel_taskd]\nallowed_tasks = %s\n' % TASKS)
    command = [sys.executable, '-m', 'mlaccel.cmd.taskd'] + spec.argv[1:] + [
        '--config-file', image_conf,
        '--tcp', '127.0.0.1:0',
        '--socket', os.path.join(root, 'taskd.sock'),
        '--task-log-dir', os.path.join(root, 'logs')]
    with open(os.path.join(root, 'taskd.log'), 'wb') as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log,
                                   stderr=subprocess.STDOUT,
                                   env=dict(os.environ, **spec.env))
    with _LOCK:
        GUESTS[instance_uuid] = (process, root)


def shutdown(instance_uuid, grace=5.0):
    """Stop the guest's task daemon (SIGTERM, then SIGKILL) and clean up."""
    with _LOCK:
        process, workdir = GUESTS.pop(instance_uuid, (None, None))
    if process is None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    shutil.rmtree(workdir, ignore_errors=True)


def shutdown_all():
    for instance_uuid in list(GUESTS):
        shutdown(instance_uuid)


class TaskdGuestDriver(fake.MediumFakeDriver):
    """MediumFakeDriver booting a local mlaccel-taskd per server."""

    def spawn(self, context, instance, image_meta, injected_files,
              admin_password, allocations, network_info=None,
              block_device_info=None, power_on=True, accel_info=None):
        if instance.display_name in FAIL_SPAWN:
            raise exception.BuildAbortException(
                instance_uuid=instance.uuid, reason='injected spawn failure')
        super().spawn(context, instance, image_meta, injected_files,
                      admin_password, allocations, network_info,
                      block_device_info, power_on, accel_info)
        if instance.user_data and \
                instance.display_name not in SILENT_SPAWN:
            boot(instance.uuid, instance.user_data)

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        shutdown(instance.uuid)
        super().destroy(context, instance, network_info, block_device_info,
                        destroy_disks, destroy_secrets)
