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

"""The stock arm's launch: what an openstacksdk user does without mlaccel.

The task is started cold by each server's user-data (``python -m
mlaccel.tasks.clip --print-times``, as cloud-init's ``runcmd``); the
client creates the servers, waits with ``wait_for_server`` (openstacksdk's
2 s polling) and then polls each guest's console until the task has
printed its end. The record is :mod:`mlaccel.launcher.record`'s, built
from the same events as the launcher's: Nova's versioned notifications
(heard by a listener of the experiment's own, which changes nothing in the
cloud) or instance actions for scheduling and creation, the guest's own
clock, printed on its console, for the first training step and the end.
"""

import concurrent.futures
import threading
import time
import uuid

from oslo_log import log as logging
import yaml

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.launcher import record
from mlaccel.launcher import servers as servers_mod
from mlaccel.nova import actions
from mlaccel.nova import notifications as events
from mlaccel.tasks import clip

LOG = logging.getLogger(__name__)

#: openstacksdk's ``wait_for_server`` default interval.
POLL_INTERVAL = 2.0


def user_data(args, threads=1):
    """cloud-config starting the example task cold, its times printed.

    :param args: the task's arguments (``steps``, ``seed``, ...), given
        as the options of ``python -m mlaccel.tasks.clip``.
    """
    argv = ['python3', '-m', 'mlaccel.tasks.clip']
    for name, value in sorted(args.items()):
        argv += ['--' + name.replace('_', '-'), str(value)]
    argv += ['--threads', str(threads), '--print-times']
    return '#cloud-config\n' + yaml.safe_dump({'runcmd': [argv]})


class ColdLaunch:
    """One stock launch of ``count`` servers; :meth:`run` returns a record.

    :param notification_url: transport of Nova's versioned notifications,
        listened to for the boundaries only; ``None``: instance actions.
    :param boot_volume_gb: boot from a new volume of this size.
    """

    def __init__(self, conn, image_id, flavor_id, count, args,
                 notification_url=None, conf=None, boot_volume_gb=None,
                 timeout=1800.0, name_prefix='mlaccel-stock',
                 poll_interval=POLL_INTERVAL):
        self.conn = conn
        self.launch_id = uuid.uuid4().hex[:12]
        self.image_id = image_id
        self.flavor_id = flavor_id
        self.count = count
        self.args = dict(args)
        self.notification_url = notification_url
        self.conf = conf or mlaccel_conf.CONF
        self._failed = threading.Event()
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.servers = servers_mod.ServerSet(conn, self.launch_id,
                                             name_prefix, boot_volume_gb)
        self.request = {'image': image_id, 'flavor': flavor_id,
                        'count': count, 'entry': 'clip (cold, user-data)',
                        'args': dict(args),
                        'network': 'none', 'server_group': None,
                        'timeout': timeout,
                        'boot_volume_gb': boot_volume_gb}

    def run(self):
        deadline = time.monotonic() + self.timeout
        source = self._listen()
        vms = [{'name': self.servers.name(i), 'server_id': None,
                'observed': {'poll_interval': self.poll_interval}}
               for i in range(self.count)]
        outcome, error, cleanup = api.FAILED, None, {}
        try:
            with concurrent.futures.ThreadPoolExecutor(
                    self.count, thread_name_prefix='mlaccel-cold') as pool:
                list(pool.map(lambda i: self._guarded(i, vms[i], deadline),
                              range(self.count)))
            failed = [vm for vm in vms if vm.get('exit_code') != 0]
            if failed:
                error = '%d of %d tasks did not succeed: %s' % (
                    len(failed), len(vms), '; '.join(
                        '%s: %s' % (vm['name'], vm.get('error'))
                        for vm in failed))
            else:
                outcome = api.SUCCEEDED
        except Exception as exc:
            error = str(exc) or type(exc).__name__
            LOG.error('Stock launch %s failed: %s', self.launch_id, error)
        finally:
            self._boundaries(source, vms)
            cleanup = self.servers.delete_all(timeout=300.0,
                                              interval=self.poll_interval)
        return record.build(self.launch_id, self.request, vms, outcome,
                            error=error, cleanup=cleanup)

    def _listen(self):
        if not self.notification_url:
            return None
        try:
            return events.NotificationSource(self.notification_url,
                                             self.conf).start()
        except Exception as exc:
            LOG.warning('No notifications (%s): instance actions instead',
                        events.masked(exc, self.notification_url))
            return None

    def _guarded(self, index, vm, deadline):
        """:meth:`_one`; a failure stops the launch's other waits."""
        try:
            self._one(index, vm, deadline)
        except Exception:
            self._failed.set()
            raise

    def _one(self, index, vm, deadline):
        """Create, wait for ACTIVE, then read the console until the end."""
        observed = vm['observed']
        observed['requested'] = time.time()
        server = self.servers.create(
            index, self.image_id, self.flavor_id,
            user_data=user_data(self.args))
        vm['server_id'] = server.id
        server = self.conn.compute.wait_for_server(
            server, interval=self.poll_interval,
            wait=max(1, int(deadline - time.monotonic())))
        observed['active_seen'] = time.time()
        vm['status'] = server.status
        while True:
            output = self.conn.compute.get_server_console_output(
                server).get('output', '')
            times = clip.read_times(output)
            if 'finished' in times:
                break
            if 'Traceback (most recent call last)' in output:
                vm['error'] = 'the task failed: %s' % output[-500:]
                self._failed.set()
                return
            if time.monotonic() > deadline or self._failed.is_set():
                vm['error'] = 'timed out waiting for the task to end' \
                    if not self._failed.is_set() else 'another VM failed'
                return
            time.sleep(self.poll_interval)
        observed['started_at'] = times.get('started')
        observed['first_step_at'] = times.get('first_step')
        observed['finished_at'] = times['finished']
        vm['exit_code'] = 0
        vm['state'] = api.SUCCEEDED

    def _boundaries(self, source, vms):
        """Nova's side of each VM's boundaries: notifications, actions."""
        try:
            if source is not None:
                built = [vm['server_id'] for vm in vms if vm['server_id']]
                source.events.wait(
                    lambda: all(source.times(s)['active'] is not None
                                for s in built), api.NOTIFICATION_GRACE)
                for vm in vms:
                    if vm['server_id']:
                        vm['observed']['notified'] = source.times(
                            vm['server_id'])
        except Exception as exc:
            LOG.warning('Reading Nova\'s notifications failed: %s', exc)
        finally:
            if source is not None:
                source.stop()
        for vm in vms:
            if vm['server_id']:
                vm['observed']['nova'] = actions.create_action_times(
                    self.conn, vm['server_id'])
