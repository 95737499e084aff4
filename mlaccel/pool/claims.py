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

A pooled VM that fails its first submit is deleted
(:meth:`Claimer.discard`) and the launch creates a fresh one in its place.
After the task, :meth:`Claimer.finish` returns each pooled member (with its
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

from mlaccel.launcher import provisioner
from mlaccel.pool import members as pool_members
from mlaccel.pool import sizing
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store

LOG = logging.getLogger(__name__)

#: Seconds a claim outlives its launch's timeout before the manager
#: reclaims (deletes) a member whose launcher vanished.
CLAIM_GRACE = 300.0
#: Seconds of arrivals kept for the sizing window's widest setting.
ARRIVALS_KEPT = 86400.0


def project_of(conn, configured=None):
    """The project the connection acts in, or ``None`` if unknown.

    ``configured`` (``[mlaccel_pool] project_id``) stands in for
    credentials that name no project; credentials naming another project
    make the project unknown.
    """
    try:
        current = conn.current_project_id
    except Exception:
        current = None
    if current and configured and current != configured:
        LOG.error('The credentials act in project %s, not in the configured '
                  '[mlaccel_pool] project_id %s: no pool is used', current,
                  configured)
        return None
    return current or configured or None


class Claimer:
    """Claims and returns pool members for launches of one project.

    :param store: the :class:`~mlaccel.pool.store.PoolStore`.
    :param conn: the project's ``openstack.connection.Connection``.
    :param timeout: seconds a member's daemon has to take its new token; a
        daemon that hangs costs the launch at most this, then the VM is
        created fresh.
    :param demand: a :class:`~mlaccel.pool.demand.DemandLog` that records
        every launch's ask (pool or not) and the fresh overhead of the VMs
        created for its misses, or ``None``.
    """

    def __init__(self, store, conn, project_id=None, timeout=5.0,
                 demand=None):
        self.timeout = timeout
        self.store = store
        self.conn = conn
        self.project_id = project_id or project_of(conn)
        self.demand = demand
        self._asks = {}   # launch id -> its PoolSpec, until finish()
        # launch id -> names of its VMs whose fresh overhead is recorded
        self._recorded = {}
        self._asks_lock = threading.Lock()

    def spec_for(self, launch, image_id, flavor_id, group_id):
        return pool_spec.PoolSpec(
            self.project_id, image_id, flavor_id,
            preload=launch.opts['preload'], server_group_id=group_id,
            network=launch.network, taskd_port=launch.opts['taskd_port'],
            boot_volume_gb=launch.servers.boot_volume_gb)

    def claim(self, launch, image_id, flavor_id, group_id):
        """Claim pooled members for as many of ``launch``'s VMs as possible.

        :returns: the handed-over members, a list of
            :class:`~mlaccel.launcher.provisioner.ClaimedMember` (at most
            one per VM) for :meth:`mlaccel.launcher.api.Launch.adopt`.
        """
        if not self.project_id:
            LOG.error('Launch %s claims no pool member: the project of its '
                      'credentials is unknown (set [mlaccel_pool] '
                      'project_id); creating every VM fresh',
                      launch.launch_id)
            return []
        spec = self.spec_for(launch, image_id, flavor_id, group_id)
        key, count = spec.key, len(launch.vms)
        with self._asks_lock:
            self._asks[launch.launch_id] = spec
        if not self.store.exists(key):
            self._record(spec.project_id, 'record_ask', spec,
                         count, 0)
            return []
        now = time.time()
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
            self._record(spec.project_id, 'record_ask', spec,
                         count, 0)
            return []
        with concurrent.futures.ThreadPoolExecutor(
                max(1, min(len(taken), 16)),
                thread_name_prefix='mlaccel-claim') as workers:
            handed = list(workers.map(self._hand_over, taken))
        unverified = [m for m, conn in zip(taken, handed)
                      if conn is None and m.get('unverified')]
        failed = [m for m, conn in zip(taken, handed)
                  if conn is None and not m.get('unverified')]
        if failed:
            self._forget(key, failed)
        if unverified:
            self._put_back(key, launch.launch_id, unverified)
        got = [_claimed(key, m, conn)
               for m, conn in zip(taken, handed) if conn]
        LOG.info('Launch %s: %d of %d VMs from warm pool %s',
                 launch.launch_id, len(got), count, key)
        self._record(spec.project_id, 'record_ask', spec, count,
                     len(got))
        return got

    def _record(self, project_id, method, *args):
        """Record demand by the log's ``method``; a failure costs a warning."""
        if self.demand is None:
            return
        try:
            getattr(self.demand, method)(*args)
        except (pool_store.PoolUnavailable, OSError, ValueError) as exc:
            LOG.warning('Demand of project %s not recorded: %s', project_id,
                        exc)

    def _hand_over(self, member):
        """Give the member's daemon a fresh token; ``None`` on failure.

        Returns the client that did it, still connected, for the first
        submit.

        The server must also be one this project sees, ACTIVE: a member is
        only ever claimed by its own project. Nova is asked while the token
        changes (both take a round trip); a member failing either check is
        not used, and deleted, but one whose project Nova does not name is
        only not used: it goes back to the pool (``unverified``).
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
        if member.get('unverified'):
            conn.close()
            member['token'] = conn.token
            LOG.error('Pool member %s is not used: %s; it stays in its pool',
                      member['server_id'], member['unverified'])
            return None
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
        except Exception as exc:
            member['problem'] = 'Nova: %s' % exc
            return
        if not server.project_id:
            member['unverified'] = 'Nova does not say whose server it is'
        elif server.project_id != self.project_id:
            member['problem'] = 'Nova: server belongs to another project'

    def _put_back(self, key, launch_id, members):
        """Return claimed, unused members to idle, with their tokens now."""
        now = time.time()
        try:
            with self.store.transaction(key) as state:
                for seen in members:
                    member = state['members'].get(seen['server_id'])
                    if member is None or member['holder'] != launch_id:
                        continue
                    member.update(state=pool_store.IDLE, token=seen['token'],
                                  holder=None, claimed_at=None,
                                  claim_deadline=None, idle_since=now)
                    state['stats']['claimed'] -= 1
        except pool_store.PoolUnavailable as exc:
            LOG.warning('Pool %s unavailable (%s); its manager ends the '
                        'claim of %d unused member(s) when it expires', key,
                        exc, len(members))

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

    def discard(self, member):
        """A claimed member failed its first submit: delete it.

        The member (a :class:`~mlaccel.launcher.provisioner.ClaimedMember`)
        is deleted and dropped from its pool; the launch creates a fresh VM
        in its place.
        """
        LOG.warning('Pool member %s failed its first submit; deleting it '
                    'and creating a fresh VM in its place', member.server_id)
        self._forget(member.pool, [{'server_id': member.server_id}])

    def ready(self, launch):
        """Record the fresh overhead of the launch's VMs created fresh.

        Called once they are warm, before the tasks run: the manager can
        weigh their key while the first task of it is still running (a
        task of hours would otherwise hide its key for hours). Each VM is
        recorded once; :meth:`finish` records those not recorded yet.
        """
        with self._asks_lock:
            spec = self._asks.get(launch.launch_id)
            done = self._recorded.setdefault(launch.launch_id, set())
            vms = [vm for vm in launch.vms
                   if not vm.pooled and vm.ready is not None
                   and vm.requested is not None and vm.name not in done]
            done.update(vm.name for vm in vms)
        if spec is not None and vms:
            self._record(spec.project_id, 'record_fresh', spec,
                         [vm.ready.received_at - vm.requested for vm in vms])

    def finish(self, launch):
        """Return or delete the launch's pooled members.

        :returns: ``{'returned': [ids], 'retired': [ids]}``.
        """
        self.ready(launch)
        with self._asks_lock:
            self._asks.pop(launch.launch_id, None)
            self._recorded.pop(launch.launch_id, None)
        pooled = [vm for vm in launch.vms if vm.pooled]
        if not pooled:
            return {}
        for vm in pooled:
            held = vm.take_handover()
            if held is not None:
                held.close()
        key = pooled[0].pooled.pool
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
        tasks = vm.pooled.tasks_before + ran
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


def _claimed(key, member, conn):
    """The member of pool ``key`` as handed over through ``conn``."""
    return provisioner.ClaimedMember(
        pool=key, server_id=member['server_id'], name=member['name'],
        token=conn.token, cert_pem=member['cert_pem'],
        address=member['address'], ready_at=member['ready_at'],
        claimed_at=member['claimed_at'], tasks_before=member['tasks'],
        preloaded=tuple(member.get('preloaded') or ()),
        pid=member.get('pid'), client=conn)
