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

"""Launch a task on N fresh VMs and record its life cycle: :func:`launch`.

The steps, all bounded by one deadline (steps 1 and 2 are the
:class:`~mlaccel.launcher.provisioner.Provisioner`'s):

1. Create the N servers, each in a slot of an adaptive limiter held from
   the create call until the server is ACTIVE (or failed), so the number of
   builds in flight follows the cloud's measured build latency. Each gets
   user-data that starts the task daemon with a readiness URL, a token and
   a TLS identity of its own.
2. Wait by events: the daemons' signed readiness pushes arrive at the
   launcher's HTTPS listener; a background thread lists all the launch's
   servers in one call every ``poll_interval`` seconds only to notice
   ACTIVE and ERROR.
3. Submit the task to every daemon, over TLS pinned to that VM's own
   certificate, and wait for the results (the daemon's ``wait`` blocks
   server-side until the task ends).
4. Collect each VM's boundaries (Nova's versioned notifications when a
   notification transport is configured, instance actions otherwise; see
   :mod:`mlaccel.launcher.record`), delete every server (also ones whose
   create response was lost) and return the record.

Any failure, ``KeyboardInterrupt`` or SIGTERM turned into one ends the
launch early and still deletes every server; cleanup runs in a non-daemon
thread that a second interrupt cannot cut short.
"""

import concurrent.futures
import dataclasses
import threading

from oslo_log import log as logging
from oslo_utils import uuidutils

from mlaccel.launcher import provisioner
from mlaccel.launcher import record
from mlaccel.nova import actions
from mlaccel.taskd import protocol

LOG = logging.getLogger(__name__)

SUCCEEDED = 'succeeded'
FAILED = 'failed'
CANCELLED = 'cancelled'
#: Seconds the best-effort calls made while cleaning up may take.
CLEANUP_CALL_TIMEOUT = 10.0
#: Seconds to wait for a built server's last notification to arrive.
NOTIFICATION_GRACE = provisioner.NOTIFICATION_GRACE


#: A launch that could not run its task; cleanup already happened.
LaunchError = provisioner.LaunchError


class LaunchInterrupted(KeyboardInterrupt):
    """The launch was interrupted; servers are deleted; ``record`` is set."""

    def __init__(self, record):
        super().__init__('launch %s interrupted' % record['launch_id'])
        self.record = record


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What one launch runs: the VMs to make and the task to run on each.

    ``task`` is the :class:`~mlaccel.taskd.protocol.TaskSpec` submitted to
    every VM's daemon; see :func:`launch` for the other fields.
    """

    image: str
    flavor: str
    count: int
    task: protocol.TaskSpec
    network: object = 'none'
    server_group: str = None
    timeout: float = 1800.0
    keep_servers: bool = False

    def __post_init__(self):
        if isinstance(self.count, bool) or not isinstance(self.count, int) \
                or self.count < 1:
            raise ValueError('count must be at least 1, got %r'
                             % (self.count,))
        if not self.timeout > 0:
            raise ValueError('timeout must be positive, got %r'
                             % (self.timeout,))
        if not isinstance(self.task, protocol.TaskSpec):
            raise TypeError('task must be a TaskSpec')

    def request(self):
        """The request as the record shows it."""
        return {'image': self.image, 'flavor': self.flavor,
                'count': self.count, 'entry': self.task.entry,
                'args': self.task.args, 'network': self.network,
                'server_group': self.server_group, 'timeout': self.timeout}


class Launch:
    """One launch of a :class:`LaunchSpec`; see :func:`launch`.

    Its VMs come from a :class:`~mlaccel.launcher.provisioner.Provisioner`
    (and a warm pool's claim); the launch submits the task to each, waits
    for the results and records the VMs' lives.
    """

    def __init__(self, conn, spec, *, limiter=None, listener=None,
                 progress=None, cancel=None, conf=None, user_data=None,
                 warm_pool=None, **options):
        self.provisioner = provisioner.Provisioner(
            conn, spec.count, timeout=spec.timeout, network=spec.network,
            limiter=limiter, listener=listener, cancel=cancel,
            user_data=user_data, conf=conf, notifications=True,
            on_wait=self._report_progress, **options)
        self.opts = self.provisioner.opts
        self.conf = self.provisioner.conf
        self.conn = conn
        self.launch_id = self.provisioner.launch_id
        self.spec = spec
        self.request = spec.request()
        self.network = spec.network
        self.server_group = spec.server_group
        self.timeout = spec.timeout
        self.keep_servers = spec.keep_servers
        self.limiter = self.provisioner.limiter
        self.listener = self.provisioner.listener
        self.servers = self.provisioner.servers
        self.vms = self.provisioner.vms
        self.progress = progress
        self.warm_pool = warm_pool
        self._last_progress = None

    # -- the whole launch ------------------------------------------------

    def run(self):
        """Run the launch; return its record (see :func:`launch`)."""
        outcome, error, interrupted = FAILED, None, False
        cleanup = {}
        try:
            self.provisioner.start()
            image_id, flavor_id, group_id = self._resolve()
            if self.warm_pool is not None:
                self.adopt(self.warm_pool.claim(self, image_id, flavor_id,
                                                group_id))
            self.provisioner.create(image_id, flavor_id, group_id)
            self.provisioner.wait_ready()
            if self.warm_pool is not None:
                self.warm_pool.ready(self)
            self._run_tasks()
            failed = [vm for vm in self.vms
                      if vm.task.get('state') != SUCCEEDED]
            if failed:
                error = '%d of %d tasks did not succeed: %s' % (
                    len(failed), len(self.vms), '; '.join(
                        '%s %s: %s' % (vm.name, vm.task.get('state'),
                                       vm.task.get('error'))
                        for vm in failed))
            else:
                outcome = SUCCEEDED
        except KeyboardInterrupt:
            outcome, error, interrupted = CANCELLED, 'interrupted', True
            LOG.warning('Launch %s interrupted; deleting its servers',
                        self.launch_id)
        except Exception as exc:
            error = str(exc) or type(exc).__name__
            LOG.error('Launch %s failed: %s', self.launch_id, error)
        finally:
            cleanup = _run_to_end(
                lambda: self._cleanup(outcome == SUCCEEDED))
        result = record.build(
            self.launch_id, self.request,
            [vm.to_record(self.opts['poll_interval']) for vm in self.vms],
            outcome, error=error,
            cleanup=cleanup, limiter={'limit': self.limiter.limit})
        if interrupted:
            raise LaunchInterrupted(result)
        return result

    def adopt(self, members):
        """Run on the claimed pool ``members``, one VM each.

        See :class:`~mlaccel.launcher.provisioner.ClaimedMember`; the other
        VMs are created fresh.
        """
        self.provisioner.adopt(members)

    def _resolve(self):
        compute = self.conn.compute
        flavor = compute.find_flavor(self.spec.flavor,
                                     ignore_missing=False)
        image_id = self.spec.image
        if not uuidutils.is_uuid_like(image_id):
            image_id = self.conn.image.find_image(
                image_id, ignore_missing=False).id
        group_id = None
        if self.server_group:
            group_id = compute.find_server_group(
                self.server_group, ignore_missing=False).id
        return image_id, flavor.id, group_id

    # -- progress --------------------------------------------------------

    def snapshot(self):
        """Counts of VMs per phase, for progress displays."""
        vms = self.vms
        return {'launch_id': self.launch_id, 'count': len(vms),
                'created': sum(vm.server_id is not None for vm in vms),
                'active': sum(vm.status == 'ACTIVE' for vm in vms),
                'ready': sum(vm.ready is not None for vm in vms),
                'running': sum(vm.task_id is not None and vm.task is None
                               for vm in vms),
                'done': sum(vm.done for vm in vms),
                'limit': self.limiter.limit,
                'elapsed': self.timeout - self.provisioner.remaining()}

    def _report_progress(self):
        if self.progress is None:
            return
        snap = self.snapshot()
        key = {k: v for k, v in snap.items() if k != 'elapsed'}
        if key != self._last_progress:
            self._last_progress = key
            try:
                self.progress(snap)
            except Exception:
                LOG.exception('Progress callback failed')

    # -- the task --------------------------------------------------------

    def _run_tasks(self):
        with concurrent.futures.ThreadPoolExecutor(
                min(len(self.vms), 64),
                thread_name_prefix='mlaccel-submit') as pool:
            for vm, task_id in zip(self.vms, pool.map(self._submit,
                                                      self.vms)):
                vm.task_id = task_id
        for vm in self.vms:
            threading.Thread(target=self._wait_task, args=(vm,), daemon=True,
                             name='mlaccel-wait-%d' % vm.index).start()
        self.provisioner.wait(lambda vm: vm.done, 'done')

    def _submit(self, vm):
        try:
            # A pooled VM's daemon is still connected from its hand-over.
            held = vm.take_handover() if vm.pooled else None
            with held or self.provisioner.client(vm) as client:
                return client.submit(self.spec.task)
        except Exception:
            if vm.pooled is None:
                raise
        # A pooled VM that fails its first submit is replaced by a fresh
        # one.
        self.warm_pool.discard(vm.pooled)
        self.provisioner.replace(vm)
        return self.provisioner.client(vm).submit(self.spec.task)

    def _wait_task(self, vm):
        remaining = self.provisioner.remaining
        try:
            status = self.provisioner.client(vm, remaining() + 30).wait(
                vm.task_id, timeout=remaining())
        except Exception as exc:
            self.provisioner.fail(LaunchError(
                'waiting for the task on %s failed: %s' % (vm.name, exc)))
            return
        self.provisioner.update(vm, task=status)

    # -- cleanup ---------------------------------------------------------

    def _cleanup(self, succeeded):
        self.provisioner.stop()
        for vm in self.vms:
            if vm.task_id and vm.task is None:
                self._cancel_task(vm)
        self._read_actions()
        pooled = self.warm_pool.finish(self) if self.warm_pool else {}
        keep = self.keep_servers and succeeded
        deleted = self.provisioner.close(delete=not keep)
        if keep:
            LOG.info('Keeping the servers of launch %s: %s',
                     self.launch_id, ', '.join(self.servers.ids))
            return dict(pooled, kept=sorted(self.servers.ids), leaked=[])
        return dict(pooled, **deleted)

    def _cancel_task(self, vm):
        try:
            self.provisioner.client(vm, CLEANUP_CALL_TIMEOUT).cancel(
                vm.task_id)
        except Exception as exc:
            LOG.warning('Cancelling task %s on %s failed: %s', vm.task_id,
                        vm.name, exc)

    def _read_actions(self):
        try:
            self.provisioner.notified()
        except Exception as exc:
            LOG.warning('Reading Nova\'s notifications failed: %s', exc)
        todo = [vm for vm in self.vms if vm.server_id]
        if not todo:
            return
        with concurrent.futures.ThreadPoolExecutor(
                min(len(todo), 8), thread_name_prefix='mlaccel-actions') \
                as pool:
            for vm, times in zip(todo, pool.map(
                    lambda vm: actions.create_action_times(self.conn,
                                                           vm.server_id),
                    todo)):
                vm.nova = times


def _run_to_end(function):
    """Run ``function`` in a non-daemon thread that interrupts cannot stop.

    A second Ctrl-C while servers are being deleted would otherwise leave
    them behind; the main thread keeps waiting for the cleanup instead.
    """
    outcome = {}

    def target():
        try:
            outcome['value'] = function()
        except BaseException as exc:
            outcome['error'] = exc

    thread = threading.Thread(target=target, name='mlaccel-cleanup')
    thread.start()
    while thread.is_alive():
        try:
            thread.join()
        except KeyboardInterrupt:
            LOG.warning('Still deleting servers; interrupting now would '
                        'leak them')
    if 'error' in outcome:
        LOG.error('Cleanup failed: %s', outcome['error'])
        return {'error': str(outcome['error'])}
    return outcome['value']


def launch(conn, image, flavor, count, entry, args=None, *, network='none',
           server_group=None, timeout=1800.0, keep_servers=False,
           submit_options=None, **kwargs):
    """Run ``entry`` on ``count`` new VMs and return the life-cycle record.

    :param conn: ``openstack.connection.Connection``.
    :param image: image name or id, booted with task daemon user-data.
    :param flavor: flavor name or id.
    :param count: number of VMs; the task runs once on each.
    :param entry: the task submitted to every daemon: a registered task
        name, or ``package.module:function`` where the daemon allows it.
    :param args: JSON-able dict passed to the task.
    :param network: ``'none'``, ``'auto'`` or a list of ``{'uuid': id}``.
    :param server_group: name or id of a server group to boot into.
    :param timeout: seconds for the whole launch, creation to results.
    :param keep_servers: keep the servers when the task succeeded.
    :param submit_options: the other fields of the task's
        :class:`~mlaccel.taskd.protocol.TaskSpec` (``threads``, ``seed``,
        ``env``, ``mode``...).
    :param limiter: an :class:`~mlaccel.limiter.AdaptiveLimiter` to share
        between launches (one per launch by default).
    :param listener: a started or unstarted
        :class:`~mlaccel.launcher.ready_listener.ReadinessListener` to use.
    :param progress: ``callable(snapshot_dict)`` called when counts change.
    :param cancel: a ``threading.Event``; setting it cancels the launch.
    :param user_data: ``callable(ready_url=, tcp_address=, token=,
        preload=, tls_identity=, ready_cert=)`` returning a VM's user-data;
        by default ``mlaccel.taskd.guest.user_data`` (cloud-init starting
        taskd).
    :param warm_pool: a :class:`mlaccel.pool.claims.Claimer`: VMs are
        taken from a matching warm pool first, only the shortfall is
        created, and pooled VMs are returned to their pool (or deleted)
        after the task.
    :param conf: ``oslo_config`` object with the ``mlaccel_launcher`` group;
        any of its options may also be given as keyword arguments.
    :returns: the record (see :mod:`mlaccel.launcher.record`); its
        ``outcome`` is ``succeeded`` or ``failed``, servers are gone.
    :raises LaunchInterrupted: on ``KeyboardInterrupt`` or ``cancel``, after
        deleting the servers; carries the record.
    :raises ValueError: for a bad count, timeout or task field.
    """
    spec = LaunchSpec(
        image, flavor, count,
        protocol.TaskSpec(entry, args, **dict(submit_options or {})),
        network=network, server_group=server_group, timeout=timeout,
        keep_servers=keep_servers)
    return Launch(conn, spec, **kwargs).run()
