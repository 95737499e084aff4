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

"""Claims: a launch takes warm members first and returns them after.

:meth:`Claimer.claim` takes, in one transaction on the pool's lock, up to
the launch's VM count of idle members, so a launch gets its pooled members
all at once: two launches racing for the last members each get a disjoint
share, and none waits holding part of what it needs (it creates the
shortfall instead). Each taken member is then handed over: the launcher
gives its daemon a fresh token (the ``rekey`` step, over TLS pinned to the
member's certificate, authenticated by the pool's token), so whoever held
the member before can no longer reach it. A member that fails the hand-over
is deleted and its VM created fresh. With the state bus down nothing is
claimed and every VM is created fresh.

A pooled VM that fails its first submit is deleted and replaced by a fresh
one (:meth:`Claimer.replace`). After the task, :meth:`Claimer.finish`
returns each pooled member (with its
current token) if the pool's reuse policy allows (fewer than ``max_tasks``
tasks served, the task ended, no task process left), else deletes it; a
member the launch never gave its task (the launch failed first) goes back
unused.
"""

import concurrent.futures
import secrets
import threading
import time

from oslo_log import log as logging

from mlaccel.launcher import readiness
from mlaccel.pool import members as pool_members
from mlaccel.pool import sizing
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel import tls

LOG = logging.getLogger(__name__)

#: Seconds a claim outlives its launch's timeout before the manager
#: reclaims (deletes) a member whose launcher vanished.
CLAIM_GRACE = 300.0
#: Seconds of arrivals kept for the sizing window's widest setting.
ARRIVALS_KEPT = 86400.0


def project_of(conn):
    """The project the connection acts in, or ``None`` if unknown."""
    try:
        return conn.current_project_id
    except Exception:
        return None


class Claimer:
    """Claims and returns pool members for launches of one project.

    :param store: the :class:`~mlaccel.pool.store.PoolStore`.
    :param conn: the project's ``openstack.connection.Connection``.
    :param timeout: seconds a member's daemon has to take its new token; a
        daemon that hangs costs the launch at most this, then the VM is
        created fresh.
    """

    def __init__(self, store, conn, project_id=None, timeout=5.0):
        self.timeout = timeout
        self.store = store
        self.conn = conn
        self.project_id = project_id or project_of(conn)

    def spec_for(self, launch, image_id, flavor_id, group_id):
        return pool_spec.PoolSpec(
            self.project_id, image_id, flavor_id,
            preload=launch.opts['preload'], server_group_id=group_id,
            network=launch.network, taskd_port=launch.opts['taskd_port'],
            boot_volume_gb=launch.servers.boot_volume_gb)

    def claim(self, launch, image_id, flavor_id, group_id):
        """Give ``launch`` pooled members for as many VMs as possible.

        Sets ``pooled``, ``server_id``, ``token``, ``identity`` and
        ``ready`` of the VMs that got one; returns how many did.
        """
        key = self.spec_for(launch, image_id, flavor_id, group_id).key
        if not self.store.exists(key):
            return 0
        now = time.time()
        count = len(launch.vms)
        try:
            with self.store.transaction(key) as state:
                stats = state['stats']
                stats['arrivals'] = sizing.prune(
                    stats['arrivals'] + [[now, count]], now, ARRIVALS_KEPT)
                stats['asked'] += count
                taken = pool_store.members(state, pool_store.IDLE)[:count]
                for member in taken:
                    pool_store.end_idle(state, member, now)
                    member.update(
                        state=pool_store.CLAIMED, holder=launch.launch_id,
                        claimed_at=now,
                        claim_deadline=now + launch.timeout + CLAIM_GRACE)
                stats['claimed'] += len(taken)
                taken = [dict(m) for m in taken]
        except pool_store.PoolUnavailable as exc:
            LOG.warning('Pool %s unavailable (%s); creating every VM fresh',
                        key, exc)
            return 0
        with concurrent.futures.ThreadPoolExecutor(
                max(1, min(len(taken), 16)),
                thread_name_prefix='mlaccel-claim') as workers:
            handed = list(workers.map(self._hand_over, taken))
        failed = [m for m, conn in zip(taken, handed) if conn is None]
        if failed:
            self._forget(key, failed)
        got = [(m, conn) for m, conn in zip(taken, handed) if conn]
        for vm, (member, conn) in zip(launch.vms, got):
            self._assign(vm, member, conn, key,
                         (image_id, flavor_id, group_id))
        LOG.info('Launch %s: %d of %d VMs from warm pool %s',
                 launch.launch_id, len(got), count, key)
        return len(got)

    def _hand_over(self, member):
        """Give the member's daemon a fresh token; ``None`` on failure.

        Returns the client that did it, still connected, for the first
        submit.

        The server must also be one this project sees, ACTIVE: a member is
        only ever claimed by its own project. Nova is asked while the token
        changes (both take a round trip); a member failing either check is
        not used, and deleted.
        """
        checked = threading.Thread(target=self._check_server,
                                   args=(member,), daemon=True,
                                   name='mlaccel-claim-check')
        checked.start()
        conn = pool_members.connect(member, timeout=self.timeout)
        try:
            conn.rekey(secrets.token_urlsafe(32))
        except Exception as exc:
            member['problem'] = 'its daemon: %s' % exc
        checked.join()
        if member.get('problem'):
            conn.close()
            LOG.warning('Pool member %s could not be handed over (%s); '
                        'deleting it', member['server_id'],
                        member['problem'])
            return None
        return conn

    def _check_server(self, member):
        try:
            server = self.conn.compute.get_server(member['server_id'])
            if server.status != 'ACTIVE':
                raise ValueError('server is %s' % server.status)
            if self.project_id and server.project_id and \
                    server.project_id != self.project_id:
                raise ValueError('server belongs to another project')
        except Exception as exc:
            member['problem'] = 'Nova: %s' % exc

    def _forget(self, key, failed, served=0):
        """Delete members and drop them from the pool's state."""
        for member in failed:
            pool_members.delete(self.conn, member['server_id'])
        try:
            with self.store.transaction(key) as state:
                for member in failed:
                    if state['members'].pop(member['server_id'], None):
                        state['stats']['deleted'] += 1
                state['stats']['tasks_served'] += served
        except pool_store.PoolUnavailable as exc:
            LOG.warning('Pool %s unavailable (%s); its manager drops the '
                        'deleted members when it reconciles', key, exc)

    def replace(self, launch, vm):
        """A pooled VM failed its first submit: delete it, run fresh.

        The member is deleted and dropped from its pool; in its place the
        launch creates a fresh VM (the launch's own user-data and fresh
        credentials), waits for its readiness and submits the task there.
        Returns the task's id; raises if the fresh VM fails too.
        """
        from mlaccel.launcher import api
        pooled = vm.pooled
        LOG.warning('Pool member %s failed its first submit; deleting it '
                    'and creating a fresh VM in its place',
                    pooled['server_id'])
        self._forget(pooled['pool'], [{'server_id': pooled['server_id']}])
        fresh = api._VM(vm.index, launch.servers.name(vm.index),
                        readiness.new_key())
        with launch._cond:
            vm.__dict__.update(fresh.__dict__)
            launch._by_key[vm.key] = vm
        launch.listener.expect(vm.key, launch._on_ready, vm.token)
        vm.requested = time.time()
        image_id, flavor_id, group_id = pooled['ids']
        server = launch.servers.create(
            vm.index, image_id, flavor_id, networks=launch.network,
            user_data=launch._user_data(vm), group_id=group_id)
        with launch._cond:
            vm.server_id = server.id
            launch._cond.notify_all()
            launch._cond.wait_for(
                lambda: vm.ready is not None or vm.status == 'ERROR'
                or launch._failure is not None, launch._remaining())
            if vm.ready is None:
                raise api.LaunchError(
                    'the fresh VM %s replacing a pool member did not '
                    'become ready (%s)' % (vm.name, vm.status))
        return launch._client(vm).submit(launch.spec.task)

    @staticmethod
    def _assign(vm, member, conn, key, ids):
        claimed = member['claimed_at']
        token = conn.token
        vm.pooled = {'pool': key, 'server_id': member['server_id'],
                     'ids': ids, 'client': conn,
                     'name': member['name'], 'claimed_at': claimed,
                     'tasks_before': member['tasks']}
        vm.server_id = member['server_id']
        vm.status = 'ACTIVE'
        # The record's clock starts at the claim: a pooled VM's scheduling
        # and creation take no time, its buffering runs from the claim to
        # the task's first step.
        vm.requested = vm.active_seen = claimed
        vm.token = token
        # Only the certificate is known (and pinned): the key stays in
        # the member.
        vm.identity = tls.Identity(member['cert_pem'], None)
        vm.ready = readiness.Readiness(
            key=vm.key, address=member['address'],
            ready_at=member['ready_at'], received_at=claimed,
            peer='pool', preloaded=tuple(member.get('preloaded') or ()),
            pid=member.get('pid'))

    def finish(self, launch):
        """Return or delete the launch's pooled members.

        :returns: ``{'returned': [ids], 'retired': [ids]}``.
        """
        pooled = [vm for vm in launch.vms if vm.pooled]
        if not pooled:
            return {}
        for vm in pooled:
            held = vm.pooled.pop('client', None)
            if held is not None:
                held.close()
        key = pooled[0].pooled['pool']
        try:
            max_tasks = self.store.read(key)['max_tasks']
        except Exception:
            max_tasks = 1
        keep, drop = [], []
        for vm in pooled:
            why = self._why_not_reusable(vm, max_tasks)
            if why:
                LOG.info('Pool member %s is retired: %s', vm.server_id, why)
                drop.append(vm)
            else:
                keep.append(vm)
        served = {vm.server_id for vm in pooled if vm.task_id is not None}
        returned = []
        if keep:
            try:
                returned = self._return(key, launch.launch_id, keep, served)
            except pool_store.PoolUnavailable as exc:
                LOG.warning('Pool %s unavailable (%s); deleting its members '
                            'instead of returning them', key, exc)
        drop += [vm for vm in keep if vm.server_id not in returned]
        self._forget(key, [{'server_id': vm.server_id} for vm in drop],
                     served=len(served - set(returned)))
        return {'returned': sorted(returned),
                'retired': sorted(vm.server_id for vm in drop)}

    @staticmethod
    def _why_not_reusable(vm, max_tasks):
        ran = vm.task_id is not None
        if ran and vm.task is None:
            return 'its task did not end'
        tasks = vm.pooled['tasks_before'] + ran
        if tasks >= max_tasks:
            return 'served %d tasks (at most %d)' % (tasks, max_tasks)
        return pool_members.idle_health(
            {'address': vm.ready.address, 'cert_pem': vm.identity.cert_pem},
            token=vm.token)

    def _return(self, key, launch_id, vms, served):
        now = time.time()
        returned = []
        with self.store.transaction(key) as state:
            for vm in vms:
                member = state['members'].get(vm.server_id)
                if member is None or member['holder'] != launch_id:
                    continue   # reclaimed by the manager meanwhile
                ran = vm.server_id in served
                member.update(state=pool_store.IDLE, token=vm.token,
                              holder=None, claimed_at=None,
                              claim_deadline=None, idle_since=now,
                              tasks=member['tasks'] + ran, health_failures=0)
                state['stats']['tasks_served'] += ran
                returned.append(vm.server_id)
        return returned
