"""A fake hypervisor whose guests are real, local mlaccel-taskd processes.

Nova's fake driver boots nothing, so no task daemon could ever push its
readiness. :class:`TaskdGuestDriver` keeps the fake driver's bookkeeping and,
when a server is spawned, does what cloud-init does in a real guest: it
writes the files of the server's user-data (made by
``mlaccel.taskd.guest.user_data``: taskd's configuration with the readiness
URL and preload list, and the token) and starts ``python -m mlaccel.taskd``
with that configuration. Deleting the server stops
that process. Two changes make several "guests" fit on one host: each daemon
binds TCP on ``127.0.0.1`` with a free port (it reports the port in its
readiness push) and gets its own socket and log directory.

Faults are injected by name: a server whose name is in ``FAIL_SPAWN`` fails
to spawn the way a hypervisor error does (build aborted, server ERROR).
"""

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from nova import exception
from nova.virt import fake
import yaml

from mlaccel.taskd import guest as taskd_guest

#: Root of the repository: the guests import the test tasks from it.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: Names of servers whose spawn fails (set by tests).
FAIL_SPAWN = set()
#: uuid -> (Popen, work directory) of the running guests.
GUESTS = {}
_LOCK = threading.Lock()


def boot(instance_uuid, data):
    """Do what cloud-init would with the launcher's user-data.

    The ``write_files`` of the cloud-config go under a directory of their
    own instead of ``/``; the systemd unit's ``ExecStart`` is run as
    ``python -m mlaccel.taskd`` with the written configuration file, plus
    the overrides that let several guests share one host.
    """
    document = data.decode()
    if not document.startswith('#cloud-config'):
        raise ValueError('user-data is not a cloud-config document')
    config = yaml.safe_load(document)
    root = tempfile.mkdtemp(prefix='guest-')
    written = {}
    for entry in config['write_files']:
        path = os.path.join(root, entry['path'].lstrip('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT,
                          int(entry.get('permissions', '0644'), 8)),
                  'w') as stream:
            stream.write(entry['content'])
        written[entry['path']] = path
    if ['systemctl', 'enable', '--now', taskd_guest.UNIT_NAME] \
            not in config['runcmd']:
        raise ValueError('user-data does not start %s'
                         % taskd_guest.UNIT_NAME)
    command = [sys.executable, '-m', 'mlaccel.taskd',
               '--config-file', written[taskd_guest.CONF_PATH],
               '--tcp', '127.0.0.1:0',
               '--socket', os.path.join(root, 'taskd.sock'),
               '--task-log-dir', os.path.join(root, 'logs')]
    if taskd_guest.TOKEN_PATH in written:
        command += ['--token-file', written[taskd_guest.TOKEN_PATH]]
    with open(os.path.join(root, 'taskd.log'), 'wb') as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log,
                                   stderr=subprocess.STDOUT)
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
        if instance.user_data:
            boot(instance.uuid, base64.b64decode(instance.user_data))

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        shutdown(instance.uuid)
        super().destroy(context, instance, network_info, block_device_info,
                        destroy_disks, destroy_secrets)
