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

"""Provision task VMs: create them, watch them, wait until they are ready.

A :class:`Provisioner` makes the VMs of one launch, or one warm pool
member, all bounded by one deadline:

1. :meth:`~Provisioner.create` creates the servers, each in a slot of an
   adaptive limiter held from the create call until the server is ACTIVE
   (or failed), so the number of builds in flight follows the cloud's
   measured build latency. Each gets user-data that starts the task daemon
   with a readiness URL, a token and a TLS identity of its own. VMs taken
   from a warm pool are adopted instead (:meth:`~Provisioner.adopt`).
2. :meth:`~Provisioner.wait_ready` waits by events: the daemons' signed
   readiness pushes arrive at the readiness listener; a background thread
   lists all the servers in one call every ``poll_interval`` seconds only
   to notice ACTIVE and ERROR.
3. :meth:`~Provisioner.replace` gives a VM a fresh server in place of one
   that failed (a pool member that failed its first submit).
4. :meth:`~Provisioner.close` stops watching and deletes every server
   (also ones whose create response was lost).

It owns the deadline, the status poller, the readiness listener's
expectations (and the listener, unless given one) and the listener of
Nova's notifications (:meth:`~Provisioner.notified`). State changes of the
VMs happen under one condition variable, so any thread may wait on them.
"""

import concurrent.futures
import dataclasses
import secrets
import threading
import time
import uuid

from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import ready_listener
from mlaccel.launcher import servers
from mlaccel import limiter as mlaccel_limiter
from mlaccel.nova import notifications as nova_notifications
from mlaccel import periodic
from mlaccel import tls

LOG = logging.getLogger(__name__)

#: Seconds to wait for a built server's last notification to arrive.
NOTIFICATION_GRACE = 5.0


class LaunchError(Exception):
    """A launch that could not run its task; cleanup already happened."""


@dataclasses.dataclass(frozen=True)
class ClaimedMember:
    """A warm pool member handed over to a launch.

    :meth:`mlaccel.pool.claims.Claimer.claim` returns them. ``token`` is
    the member daemon's new token; ``client`` the
    :class:`~mlaccel.taskd.client.TaskdClient` that gave it, still
    connected, for the first submit (or ``None``).
    """

    pool: str
    server_id: str
    name: str
    token: str
    cert_pem: str
    address: str
    ready_at: float
    claimed_at: float
    tasks_before: int = 0
    preloaded: tuple = ()
    pid: int = None
    client: object = None


class VM:
    """What the provisioner knows about one VM; guarded by its lock.

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
        #: The server's IP addresses in Nova's last listing (see _poll).
        self.addresses = None
        #: The :class:`ClaimedMember` when the VM came from a warm pool.
        self.pooled = None
        #: The client of a pooled VM's hand-over, until taken.
        self.handover = None

    @property
    def built(self):
        return self.status in ('ACTIVE', 'ERROR') or self.ready is not None

    @property
    def done(self):
        return self.task is not None

    def adopt(self, member):
        """Become the claimed pool ``member`` (a :class:`ClaimedMember`)."""
        self.pooled = member
        self.handover = member.client
        self.server_id = member.server_id
        self.status = 'ACTIVE'
        # The record's clock starts at the claim: a pooled VM's scheduling
        # and creation take no time, its buffering runs from the claim to
        # the task's first step.
        self.requested = self.active_seen = member.claimed_at
        self.token = member.token
        # Only the certificate is known (and pinned): the key stays in
        # the member.
        self.identity = tls.Identity(member.cert_pem, None)
        self.ready = ready_listener.Readiness(
            key=self.key, address=member.address,
            ready_at=member.ready_at, received_at=member.claimed_at,
            peer='pool', preloaded=tuple(member.preloaded or ()),
            pid=member.pid)

    def take_handover(self):
        """The hand-over's client (once), or ``None``."""
        held, self.handover = self.handover, None
        return held

    def to_record(self, poll_interval=None):
        task = self.task or {}
        return {
            'name': self.name, 'server_id': self.server_id,
            'status': self.status, 'fault': self.fault,
            # A warm pool's member (its pool's key), or None: created fresh.
            'pool': self.pooled.pool if self.pooled else None,
            'address': self.ready.address if self.ready else None,
            'ready': self.ready.to_dict() if self.ready else None,
            'task_id': self.task_id, 'state': task.get('state'),
            'result': task.get('result'), 'error': task.get('error'),
            'exit_code': task.get('exit_code'),
            'nova': self.nova,
            'observed': {
                'requested': self.requested,
                'claimed': self.pooled.claimed_at if self.pooled
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


def settings(conf, overrides):
    """The ``[mlaccel_launcher]`` options of ``conf`` with ``overrides``."""
    group = conf.mlaccel_launcher
    values = {opt.dest: getattr(group, opt.dest)
              for opt in mlaccel_conf.launcher.OPTS}
    unknown = set(overrides) - set(values)
    if unknown:
        raise TypeError('unknown launch options: %s'
                        % ', '.join(sorted(unknown)))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return values


class Provisioner:
    """The VMs of one launch: create, wait until ready, replace, close.

    :param conn: ``openstack.connection.Connection``.
    :param count: number of VMs.
    :param timeout: seconds from :meth:`start` to the deadline every wait
        is bounded by.
    :param network: ``'none'``, ``'auto'`` or a list of ``{'uuid': id}``.
    :param launch_id: names the servers (a new one by default).
    :param boot_volume_gb: boot from a new volume of this size (see
        :class:`~mlaccel.launcher.servers.ServerSet`).
    :param notifications: listen to Nova's notifications (when
        ``notification_url`` is set) for :meth:`notified`.
    :param on_wait: ``callable()`` called on every wake of a wait (the
        launch's progress display).
    :param limiter, listener, cancel, user_data, conf: see
        :func:`mlaccel.launcher.api.launch`; other keyword arguments are
        ``mlaccel_launcher`` options.
    """

    def __init__(self, conn, count, *, timeout, network='none',
                 launch_id=None, limiter=None, listener=None, cancel=None,
                 user_data=None, conf=None, boot_volume_gb=None,
                 notifications=False, on_wait=None, **options):
        conf = conf or mlaccel_conf.CONF
        self.opts = settings(conf, options)
        self.conf = conf
        self.conn = conn
        self.launch_id = launch_id or uuid.uuid4().hex[:12]
        self.network = network
        self.timeout = timeout
        self.limiter = limiter or mlaccel_limiter.AdaptiveLimiter(
            initial=min(self.opts['initial_parallelism'],
                        self.opts['max_parallelism']),
            max_limit=self.opts['max_parallelism'])
        self._own_listener = listener is None
        self.listener = listener or ready_listener.ReadinessListener(
            self.opts['listen_host'], self.opts['listen_port'],
            self.opts['callback_host'], cert_file=self.opts['tls_cert_file'],
            key_file=self.opts['tls_key_file'])
        self.make_user_data = user_data
        self.cancel_event = cancel or threading.Event()
        self.on_wait = on_wait
        self.servers = servers.ServerSet(conn, self.launch_id,
                                         self.opts['name_prefix'],
                                         boot_volume_gb=boot_volume_gb)
        self.vms = [VM(i, self.servers.name(i), ready_listener.new_key())
                    for i in range(count)]
        self._by_key = {vm.key: vm for vm in self.vms}
        self._cond = threading.Condition()
        self._failure = None
        self._stopping = False
        self._poller = periodic.Periodic(
            'mlaccel-launch-poll', self._poll_interval, self._poll,
            initial_delay=self._poll_interval)
        self._poll_error = None
        self._deadline = None
        self._ids = None
        self._listen_notifications = notifications
        self.notifications = None

    # -- starting --------------------------------------------------------

    def start(self):
        """Start the deadline, the listeners and the poller; ``self``."""
        self._deadline = time.monotonic() + self.timeout
        self.listener.start()
        if self._listen_notifications:
            self._start_notifications()
        self._poller.start()
        return self

    def _start_notifications(self):
        """Listen to Nova's notifications if a transport URL is set."""
        if not self.opts['notification_url']:
            return
        source = nova_notifications.NotificationSource(
            self.opts['notification_url'], self.conf,
            topic=self.opts['notification_topic'])
        try:
            self.notifications = source.start()
        except Exception as exc:
            LOG.warning('Cannot listen to Nova\'s notifications (%s); the '
                        'record falls back to instance actions',
                        nova_notifications.masked(
                            exc, self.opts['notification_url']))

    # -- creation --------------------------------------------------------

    def adopt(self, members):
        """Give the first VMs the claimed ``members``, one each."""
        with self._cond:
            for vm, member in zip(self.vms, members):
                vm.adopt(member)
            self._cond.notify_all()

    def create(self, image_id, flavor_id, group_id=None):
        """Create every VM not adopted and wait until each is built.

        Raises :class:`LaunchError` when one fails to build, at the
        deadline or on the first failure.
        """
        self._ids = (image_id, flavor_id, group_id)
        for vm in self.vms:
            self.listener.expect(vm.key, self._on_ready, vm.token)
        fresh = [vm for vm in self.vms if vm.pooled is None]
        workers = max(1, min(len(fresh), self.limiter.max_limit))
        pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix='mlaccel-create')
        try:
            futures = [pool.submit(self._create_one, vm) for vm in fresh]
            self.wait(lambda vm: vm.built, 'built')
            for future in futures:
                future.result(timeout=self.remaining())
        finally:
            self._stop_creating()
            pool.shutdown(wait=True, cancel_futures=True)

    def wait_ready(self):
        """Wait until every VM's daemon has pushed its readiness."""
        self.wait(lambda vm: vm.ready is not None, 'ready')

    def replace(self, vm):
        """Give ``vm`` a fresh server and credentials; wait until ready.

        The VM's old server is not deleted here (a pool member is its
        pool's to delete). Raises :class:`LaunchError` if the fresh VM
        does not become ready.
        """
        fresh = VM(vm.index, self.servers.name(vm.index),
                   ready_listener.new_key())
        with self._cond:
            vm.__dict__.update(fresh.__dict__)
            self._by_key[vm.key] = vm
        self.listener.expect(vm.key, self._on_ready, vm.token)
        self._create_one(vm, limited=False)
        with self._cond:
            self._cond.wait_for(
                lambda: vm.ready is not None or vm.status == 'ERROR'
                or self._failure is not None, self.remaining())
            if vm.ready is None:
                raise LaunchError(
                    'the fresh VM %s replacing a pool member did not '
                    'become ready (%s)' % (vm.name, vm.status))

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

    def _create_one(self, vm, limited=True):
        """Create ``vm``'s server.

        With ``limited``, in a limiter slot held until the server is built.
        """
        if not limited:
            vm.requested = time.time()
            self._request(vm)
            return
        try:
            with self.limiter.slot(timeout=self.remaining()):
                with self._cond:
                    if self._stopping:
                        return
                    vm.requested = time.time()
                self._request(vm)
                with self._cond:
                    self._cond.wait_for(lambda: vm.built or self._stopping,
                                        self.remaining())
                    if vm.status == 'ERROR':
                        raise LaunchError('server %s (%s) failed to build: %s'
                                          % (vm.name, vm.server_id,
                                             vm.fault or 'no fault given'))
        except Exception as exc:
            self.fail(exc)
            raise

    def _request(self, vm):
        image_id, flavor_id, group_id = self._ids
        server = self.servers.create(
            vm.index, image_id, flavor_id, networks=self.network,
            user_data=self._user_data(vm), group_id=group_id)
        with self._cond:
            vm.server_id = server.id
            self._cond.notify_all()

    def _on_ready(self, ready):
        """A push signed with the VM's own token arrived.

        The launcher reaches the daemon only at an address Nova lists for
        the VM's server (see :meth:`_daemon_address`), and only over TLS
        pinned to the VM's own certificate (see :meth:`client`), so it
        reaches that VM's daemon or nothing; a Unix socket address would
        name a path on the launcher's host and is refused.
        """
        vm = self._by_key[ready.key]
        if not ready.address.startswith('tcp:'):
            self.fail(LaunchError(
                'the task daemon of %s reported %r; the launcher reaches '
                'task daemons over TLS on TCP only'
                % (vm.name, ready.address[:100])))
            return
        address = self._daemon_address(vm, ready)
        if address is None:
            self.fail(LaunchError(
                'the task daemon of %s reported %s, and Nova lists no '
                'address for server %s to reach it at'
                % (vm.name, ready.address[:100], vm.server_id)))
            return
        if address != ready.address:
            LOG.warning('The task daemon of %s reported %s, which Nova does '
                        'not list for server %s; reaching it at %s instead',
                        vm.name, ready.address[:100], vm.server_id, address)
            ready = dataclasses.replace(ready, address=address)
        with self._cond:
            vm.ready = ready
            self._cond.notify_all()
        LOG.debug('Task daemon of %s ready at %s', vm.name, ready.address)

    def _daemon_address(self, vm, ready):
        """Where to reach the daemon that pushed ``ready``, or None.

        Nova's listing of the server decides
        (:func:`~mlaccel.launcher.ready_listener.daemon_address`): the last
        poll's when it holds the pushed address, otherwise Nova's current
        one, so that a push arriving before the poll saw the server's
        addresses is not refused.
        """
        with self._cond:
            listed, server_id = vm.addresses, vm.server_id
        if server_id is not None and (
                listed is None or
                ready_listener.daemon_address(ready, listed) != ready.address):
            try:
                server = self.conn.compute.get_server(server_id)
                listed = ready_listener.server_addresses(server.addresses)
            except Exception as exc:
                LOG.warning('Reading the addresses of server %s failed: %s',
                            server_id, exc)
        return ready_listener.daemon_address(ready, listed or ())

    def _poll_interval(self):
        return self.opts['poll_interval']

    def _poll(self):
        """Fallback: notice ACTIVE and ERROR with one list call per tick."""
        try:
            listed = self.servers.list()
        except Exception as exc:
            LOG.warning('Listing the launch\'s servers failed: %s', exc)
            self._poll_error = exc
            return
        seen = time.time()
        with self._cond:
            self._poll_error = None
            for vm in self.vms:
                server = listed.get(vm.server_id)
                if server is None:
                    continue
                vm.status = server.status
                vm.addresses = ready_listener.server_addresses(
                    server.addresses)
                if server.status == 'ACTIVE' and vm.active_seen is None:
                    vm.active_seen = seen
                if server.status == 'ERROR':
                    vm.fault = (server.fault or {}).get('message')
            self._cond.notify_all()

    # -- waiting ---------------------------------------------------------

    def remaining(self):
        """Seconds left until the deadline."""
        return max(0.0, self._deadline - time.monotonic())

    @property
    def failure(self):
        """The first failure, or ``None``."""
        with self._cond:
            return self._failure

    def fail(self, exc):
        """Make every wait fail with ``exc`` (the first failure wins)."""
        with self._cond:
            if self._failure is None:
                self._failure = exc
            self._cond.notify_all()

    def update(self, vm, **changes):
        """Set attributes of ``vm`` and wake the waits."""
        with self._cond:
            for name, value in changes.items():
                setattr(vm, name, value)
            self._cond.notify_all()

    def _stop_creating(self):
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def wait(self, predicate, what):
        """Block until ``predicate(vm)`` for every VM, by events.

        Raises :class:`LaunchError` on a failure or at the deadline,
        ``KeyboardInterrupt`` when cancelled.
        """
        with self._cond:
            while not all(predicate(vm) for vm in self.vms):
                if self._failure is not None:
                    raise LaunchError(str(self._failure)) from self._failure
                if self.cancel_event.is_set():
                    raise KeyboardInterrupt()
                remaining = self.remaining()
                if remaining <= 0:
                    raise LaunchError(
                        'timed out after %.0f s waiting for every VM to be '
                        '%s (%d of %d)%s' % (
                            self.timeout, what,
                            sum(map(predicate, self.vms)), len(self.vms),
                            '; listing the servers fails: %s'
                            % self._poll_error if self._poll_error else ''))
                self._waking()
                # Wakes on every state change; the cap only bounds how late
                # a cancel request set from outside is noticed.
                self._cond.wait(min(remaining, 1.0))
            self._waking()

    def _waking(self):
        if self.on_wait is not None:
            self.on_wait()

    def client(self, vm, timeout=30.0):
        """A client of ``vm``'s daemon: TLS pinned to its certificate."""
        from mlaccel.taskd import client
        return client.TaskdClient(vm.ready.address, token=vm.token,
                                  timeout=timeout,
                                  pinned_cert_pem=vm.identity.cert_pem)

    # -- the end ---------------------------------------------------------

    def notified(self):
        """Each VM's notified boundaries; stops the notifications' listener.

        Sets ``notified`` of every VM with a server; nothing without a
        listener.
        """
        source = self.notifications
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

    def stop(self):
        """Stop creating and polling; expect no more readiness pushes."""
        self._stop_creating()
        self._poller.stop(timeout=0)
        for vm in self.vms:
            self.listener.forget(vm.key)

    def close(self, delete=True):
        """Stop, delete every server, stop the listeners made here.

        :meth:`stop` first; no server is deleted unless ``delete``.

        :returns: ``{'deleted': [ids], 'leaked': [ids]}`` (see
            :meth:`~mlaccel.launcher.servers.ServerSet.delete_all`), or
            ``None`` when not deleting.
        """
        self.stop()
        try:
            if delete:
                return self.servers.delete_all(
                    timeout=self.opts['delete_timeout'],
                    interval=self.opts['poll_interval'])
            return None
        finally:
            if self.notifications is not None:
                self.notifications.stop()
            if self._own_listener:
                self.listener.stop()
