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

The steps, all bounded by one deadline:

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
import secrets
import threading
import time
import uuid

from oslo_log import log as logging
from oslo_utils import uuidutils

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import actions
from mlaccel.launcher import events
from mlaccel.launcher import readiness
from mlaccel.launcher import record
from mlaccel.launcher import servers
from mlaccel import limiter as mlaccel_limiter
from mlaccel.taskd import protocol
from mlaccel import tls

LOG = logging.getLogger(__name__)

SUCCEEDED = 'succeeded'
FAILED = 'failed'
CANCELLED = 'cancelled'
#: Seconds the best-effort calls made while cleaning up may take.
CLEANUP_CALL_TIMEOUT = 10.0
#: Seconds to wait for a built server's last notification to arrive.
NOTIFICATION_GRACE = 5.0


class LaunchError(Exception):
    """A launch that could not run its task; cleanup already happened."""


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


class _VM:
    """What the launcher knows about one VM; guarded by the launch lock.

    Each VM has credentials of its own, given to it alone in its user-data:
    the readiness ``key`` naming its URL, the ``token`` that signs its
    readiness push and authorises requests to its daemon, and the TLS
    ``identity`` of its daemon's listener, pinned by the launcher.
    """

    def __init__(self, index, name, key):
        self.index = index
        self.name = name
        self.key = key
        self.token = secrets.token_urlsafe(32)
        self.identity = tls.new_identity(name)
        self.server_id = None
        self.status = None
        self.fault = None
        self.requested = None
        self.active_seen = None
        self.ready = None
        self.task_id = None
        self.task = None
        self.nova = None
        self.notified = None
        #: Set when the VM is a warm pool member (see mlaccel.pool.claims).
        self.pooled = None

    @property
    def built(self):
        return self.status in ('ACTIVE', 'ERROR') or self.ready is not None

    @property
    def done(self):
        return self.task is not None

    def to_record(self, poll_interval=None):
        task = self.task or {}
        return {
            'name': self.name, 'server_id': self.server_id,
            'status': self.status, 'fault': self.fault,
            # A warm pool's member (its pool's key), or None: created fresh.
            'pool': self.pooled['pool'] if self.pooled else None,
            'address': self.ready.address if self.ready else None,
            'ready': self.ready.to_dict() if self.ready else None,
            'task_id': self.task_id, 'state': task.get('state'),
            'result': task.get('result'), 'error': task.get('error'),
            'exit_code': task.get('exit_code'),
            'nova': self.nova,
            'observed': {
                'requested': self.requested,
                'claimed': self.pooled['claimed_at'] if self.pooled
                else None,
                'notified': self.notified,
                'nova': self.nova,
                'active_seen': self.active_seen,
                'poll_interval': poll_interval,
                'ready_received': self.ready.received_at
                if self.ready else None,
                'first_step_at': task.get('first_step_at'),
                'started_at': task.get('started_at'),
                'finished_at': task.get('finished_at')}}


def _settings(conf, overrides):
    group = conf.mlaccel_launcher
    values = {opt.dest: getattr(group, opt.dest)
              for opt in mlaccel_conf.launcher.OPTS}
    unknown = set(overrides) - set(values)
    if unknown:
        raise TypeError('unknown launch options: %s'
                        % ', '.join(sorted(unknown)))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return values


class Launch:
    """One launch of a :class:`LaunchSpec`; see :func:`launch`."""

    def __init__(self, conn, spec, *, limiter=None, listener=None,
                 progress=None, cancel=None, conf=None, user_data=None,
                 warm_pool=None, **options):
        conf = conf or mlaccel_conf.CONF
        self.opts = _settings(conf, options)
        self.conf = conf
        self.conn = conn
        self.launch_id = uuid.uuid4().hex[:12]
        self.spec = spec
        self.request = spec.request()
        self.network = spec.network
        self.server_group = spec.server_group
        self.timeout = spec.timeout
        self.keep_servers = spec.keep_servers
        self.limiter = limiter or mlaccel_limiter.AdaptiveLimiter(
            initial=min(self.opts['initial_parallelism'],
                        self.opts['max_parallelism']),
            max_limit=self.opts['max_parallelism'])
        self._own_listener = listener is None
        self.listener = listener or readiness.ReadinessListener(
            self.opts['listen_host'], self.opts['listen_port'],
            self.opts['callback_host'], cert_file=self.opts['tls_cert_file'],
            key_file=self.opts['tls_key_file'])
        self.progress = progress
        self.make_user_data = user_data
        self.warm_pool = warm_pool
        self.cancel_event = cancel or threading.Event()
        self.servers = servers.ServerSet(conn, self.launch_id,
                                         self.opts['name_prefix'])
        self.vms = [_VM(i, self.servers.name(i), readiness.new_key())
                    for i in range(spec.count)]
        self._by_key = {vm.key: vm for vm in self.vms}
        self._cond = threading.Condition()
        self._failure = None
        self._stopping = False
        self._stop_polling = threading.Event()
        self._poll_error = None
        self._deadline = None
        self._last_progress = None

    # -- the whole launch ------------------------------------------------

    def run(self):
        """Run the launch; return its record (see :func:`launch`)."""
        self._deadline = time.monotonic() + self.timeout
        outcome, error, interrupted = FAILED, None, False
        cleanup = {}
        try:
            self.listener.start()
            self._start_notifications()
            image_id, flavor_id, group_id = self._resolve()
            poller = threading.Thread(target=self._poll, daemon=True,
                                      name='mlaccel-launch-poll')
            poller.start()
            self._create_all(image_id, flavor_id, group_id)
            self._wait_for(lambda vm: vm.ready is not None, 'ready')
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

    # -- creation --------------------------------------------------------

    def _user_data(self, vm):
        make = self.make_user_data
        if make is None:
            from mlaccel.taskd import guest
            make = guest.user_data
        return make(
            ready_url=self.listener.url_for(vm.key),
            tcp_address='0.0.0.0:%d' % self.opts['taskd_port'],
            token=vm.token, preload=list(self.opts['preload']),
            tls_identity=vm.identity, ready_cert=self.listener.cert_pem)

    def _create_all(self, image_id, flavor_id, group_id):
        if self.warm_pool is not None:
            self.warm_pool.claim(self, image_id, flavor_id, group_id)
        for vm in self.vms:
            self.listener.expect(vm.key, self._on_ready, vm.token)
        fresh = [vm for vm in self.vms if vm.pooled is None]
        workers = max(1, min(len(fresh), self.limiter.max_limit))
        pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix='mlaccel-create')
        try:
            futures = [pool.submit(self._create_one, vm, image_id,
                                   flavor_id, group_id) for vm in fresh]
            self._wait_for(lambda vm: vm.built, 'built')
            for future in futures:
                future.result(timeout=self._remaining())
        finally:
            self._stop_creating()
            pool.shutdown(wait=True, cancel_futures=True)

    def _create_one(self, vm, image_id, flavor_id, group_id):
        try:
            with self.limiter.slot(timeout=self._remaining()):
                with self._cond:
                    if self._stopping:
                        return
                    vm.requested = time.time()
                server = self.servers.create(
                    vm.index, image_id, flavor_id, networks=self.network,
                    user_data=self._user_data(vm), group_id=group_id)
                with self._cond:
                    vm.server_id = server.id
                    self._cond.notify_all()
                    self._cond.wait_for(lambda: vm.built or self._stopping,
                                        self._remaining())
                    if vm.status == 'ERROR':
                        raise LaunchError('server %s (%s) failed to build: %s'
                                          % (vm.name, vm.server_id,
                                             vm.fault or 'no fault given'))
        except Exception as exc:
            self._fail(exc)
            raise

    def _on_ready(self, ready):
        """A push signed with the VM's own token arrived.

        The launcher then talks to the address it names only over TLS
        pinned to the VM's own certificate (see :meth:`_client`), so it
        reaches that VM's daemon or nothing; a Unix socket address would
        name a path on the launcher's host and is refused.
        """
        vm = self._by_key[ready.key]
        if not ready.address.startswith('tcp:'):
            self._fail(LaunchError(
                'the task daemon of %s reported %r; the launcher reaches '
                'task daemons over TLS on TCP only'
                % (vm.name, ready.address[:100])))
            return
        with self._cond:
            vm.ready = ready
            self._cond.notify_all()
        LOG.debug('Task daemon of %s ready at %s', vm.name, ready.address)

    def _poll(self):
        """Fallback: notice ACTIVE and ERROR with one list call per tick."""
        while not self._stop_polling.wait(self.opts['poll_interval']):
            try:
                listed = self.servers.list()
            except Exception as exc:
                LOG.warning('Listing the launch\'s servers failed: %s', exc)
                self._poll_error = exc
                continue
            seen = time.time()
            with self._cond:
                self._poll_error = None
                for vm in self.vms:
                    server = listed.get(vm.server_id)
                    if server is None:
                        continue
                    vm.status = server.status
                    if server.status == 'ACTIVE' and vm.active_seen is None:
                        vm.active_seen = seen
                    if server.status == 'ERROR':
                        vm.fault = (server.fault or {}).get('message')
                self._cond.notify_all()

    # -- waiting ---------------------------------------------------------

    def _remaining(self):
        return max(0.0, self._deadline - time.monotonic())

    def _fail(self, exc):
        """Make the launch fail with ``exc`` (the first failure wins)."""
        with self._cond:
            if self._failure is None:
                self._failure = exc
            self._cond.notify_all()

    def _stop_creating(self):
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def _wait_for(self, predicate, what):
        """Block until ``predicate(vm)`` for every VM, by events."""
        with self._cond:
            while not all(predicate(vm) for vm in self.vms):
                if self._failure is not None:
                    raise LaunchError(str(self._failure)) from self._failure
                if self.cancel_event.is_set():
                    raise KeyboardInterrupt()
                remaining = self._remaining()
                if remaining <= 0:
                    raise LaunchError(
                        'timed out after %.0f s waiting for every VM to be '
                        '%s (%d of %d)%s' % (
                            self.timeout, what,
                            sum(map(predicate, self.vms)), len(self.vms),
                            '; listing the servers fails: %s'
                            % self._poll_error if self._poll_error else ''))
                self._report_progress()
                # Wakes on every state change; the cap only bounds how late
                # a cancel request set from outside is noticed.
                self._cond.wait(min(remaining, 1.0))
            self._report_progress()

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
                'elapsed': self.timeout - self._remaining()}

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

    def _client(self, vm, timeout=30.0):
        from mlaccel.taskd import client
        return client.TaskdClient(vm.ready.address, token=vm.token,
                                  timeout=timeout,
                                  pinned_cert_pem=vm.identity.cert_pem)

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
        self._wait_for(lambda vm: vm.done, 'done')

    def _submit(self, vm):
        try:
            # A pooled VM's daemon is still connected from its hand-over.
            held = vm.pooled.pop('client', None) if vm.pooled else None
            with held or self._client(vm) as client:
                return client.submit(self.spec.task)
        except Exception:
            if vm.pooled is None:
                raise
            # A pooled VM that fails its first submit is replaced.
            return self.warm_pool.replace(self, vm)

    def _wait_task(self, vm):
        try:
            status = self._client(vm, self._remaining() + 30).wait(
                vm.task_id, timeout=self._remaining())
        except Exception as exc:
            self._fail(LaunchError('waiting for the task on %s failed: %s'
                                   % (vm.name, exc)))
            return
        with self._cond:
            vm.task = status
            self._cond.notify_all()

    # -- cleanup ---------------------------------------------------------

    def _cleanup(self, succeeded):
        self._stop_creating()
        self._stop_polling.set()
        for vm in self.vms:
            self.listener.forget(vm.key)
            if vm.task_id and vm.task is None:
                self._cancel_task(vm)
        self._read_actions()
        pooled = self.warm_pool.finish(self) if self.warm_pool else {}
        try:
            if self.keep_servers and succeeded:
                LOG.info('Keeping the servers of launch %s: %s',
                         self.launch_id, ', '.join(self.servers.ids))
                return dict(pooled, kept=sorted(self.servers.ids),
                            leaked=[])
            return dict(pooled, **self.servers.delete_all(
                timeout=self.opts['delete_timeout'],
                interval=self.opts['poll_interval']))
        finally:
            if self._own_listener:
                self.listener.stop()

    def _cancel_task(self, vm):
        try:
            self._client(vm, CLEANUP_CALL_TIMEOUT).cancel(vm.task_id)
        except Exception as exc:
            LOG.warning('Cancelling task %s on %s failed: %s', vm.task_id,
                        vm.name, exc)

    def _start_notifications(self):
        """Listen to Nova's notifications if a transport URL is set."""
        self.notifications = None
        if not self.opts['notification_url']:
            return
        source = events.NotificationSource(
            self.opts['notification_url'], self.conf,
            topic=self.opts['notification_topic'])
        try:
            self.notifications = source.start()
        except Exception as exc:
            LOG.warning('Cannot listen to Nova\'s notifications (%s); the '
                        'record falls back to instance actions',
                        events.masked(exc, self.opts['notification_url']))

    def _read_notifications(self):
        """Each VM's notified boundaries; stops the listener."""
        source = getattr(self, 'notifications', None)
        if source is None:
            return
        try:
            # A pool member was built before this listener bound its
            # queue: its notifications went by, its boundaries are its claim.
            built = [vm.server_id for vm in self.vms
                     if vm.server_id and vm.built and not vm.pooled]

            def complete():
                return all(
                    source.times(server)['active'] is not None
                    or source.times(server)['failed'] is not None
                    for server in built)
            if not source.events.wait(complete, NOTIFICATION_GRACE):
                LOG.warning('Some of the launch\'s build notifications did '
                            'not arrive; their VMs fall back to instance '
                            'actions')
            for vm in self.vms:
                if vm.server_id:
                    vm.notified = source.times(vm.server_id)
        finally:
            source.stop()

    def _read_actions(self):
        try:
            self._read_notifications()
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
        :class:`~mlaccel.launcher.readiness.ReadinessListener` to use.
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
