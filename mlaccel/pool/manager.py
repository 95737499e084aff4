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

"""The pool manager: keeps every pool warm, sized, healthy and accounted.

Several managers may run; only the one holding the leader lock on the state
bus acts (the lock is released when its holder dies or loses the bus). A
manager tends only the pools of the project its credentials act in
(:func:`mlaccel.pool.claims.project_of`): a pool of another project, or
every pool while that project is unknown, is skipped with an error. Each
round, for each pool of its project in the store:

1. **Reconcile** with Nova. A member the store knows but Nova does not list
   (deleted, or ERROR) is dropped; a server named as a member of the pool
   that the store does not know (a manager killed between the create call
   and recording the member) is deleted: its token is lost. A claim whose
   launcher vanished (past its deadline) is ended by deleting the member.
2. **Check** each idle member's daemon (pinned TLS, its token); one that
   fails ``health_failures`` checks in a row is deleted.
3. **Size** the pool (:mod:`mlaccel.pool.sizing`) and create the missing
   members (:func:`mlaccel.pool.members.build`) or delete the surplus,
   oldest idle first. A failed create (no capacity, over quota, a failed
   build) stops the pool's growth for a while (:func:`backoff`).

Idle VM-seconds are counted once, when a member stops being idle (claimed
or deleted); ``idle_vm_s / tasks_served`` is the idle cost per task served.
Changes go through :meth:`mlaccel.pool.store.PoolStore.transaction`, so a
manager killed at any point leaves nothing counted twice.
"""

import concurrent.futures
import threading
import time

from oslo_log import log as logging

from mlaccel.launcher import ready_listener
from mlaccel import periodic
from mlaccel.pool import claims
from mlaccel.pool import learning
from mlaccel.pool import members as pool_members
from mlaccel.pool import sizing
from mlaccel.pool import store as pool_store
from mlaccel import statebus

LOG = logging.getLogger(__name__)

LEADER_LOCK = 'mlaccel-pool-leader'
GONE = ('DELETED', 'SOFT_DELETED', 'ERROR')


def target(state, group, now):
    """The number of idle members the pool should hold now.

    A learned pool holds what the last allocation granted it
    (:mod:`mlaccel.pool.learning`); an operator's, Little's law's size.
    """
    stats = state['stats']
    if learning.is_learned(state):
        size = max(0, min(state.get('learned_target', 0),
                          state['bounds']['max']))
    else:
        rate = sizing.arrival_rate(stats['arrivals'], now,
                                   group.arrival_window)
        lead = stats['lead_time_s']
        if lead is None:
            lead = group.default_lead_time
        size = sizing.target_size(rate, lead, group.margin,
                                  state['bounds']['min'],
                                  state['bounds']['max'])
    if paused(stats, now):
        size = min(size, len(_idle(state)))
    return size


def paused(stats, now):
    """Seconds the pool's growth stays paused after failed refills, or 0."""
    until = stats.get('capacity_until')
    return until - now if until is not None and until > now else 0.0


def backoff(group, failed_rounds):
    """Seconds a pool does not grow after ``failed_rounds`` failed refills.

    ``capacity_backoff_first`` after the first, doubled with each further
    one in a row, at most ``capacity_backoff``.
    """
    first, longest = group.capacity_backoff_first, group.capacity_backoff
    if failed_rounds <= 0:
        return 0.0
    # 2 ** 63 seconds is past any bound; the exponent stays small.
    return min(longest, first * 2.0 ** min(failed_rounds - 1, 63))


def _idle(state):
    return pool_store.members(state, pool_store.IDLE)


class PoolManager:
    """Tends the pools of ``store`` with the project connection ``conn``.

    :param project_id: the project of ``conn``; by default the one its
        credentials name, or ``[mlaccel_pool] project_id`` for credentials
        that name none.
    :param leader_lock: ``callable(name) -> lock`` (a
        :class:`~mlaccel.pool.store.BusLocks`); ``None`` acts always.
    :param image_visible: ``callable(image_id) -> bool``, whether the
        project can boot an image, for learned pools; by default Glance is
        asked with ``conn``.
    :param launch_options: ``mlaccel_launcher`` options for the members'
        launches (``listen_host``, ``callback_host``...).
    """

    def __init__(self, conn, store, conf, leader_lock=None, listener=None,
                 project_id=None, image_visible=None, **launch_options):
        self.conn = conn
        self.project_id = project_id
        # Keys of the pools skipped, and why: each is logged once.
        self._skipped = {}
        self.store = store
        self.conf = conf
        self.group = conf.mlaccel_pool
        self.leader_lock = leader_lock
        self._leader = None
        self.launch_options = launch_options
        self._own_listener = listener is None
        self.listener = listener
        self.stop_event = threading.Event()
        self._learner = None
        self._visible = image_visible or self._image_visible

    # -- leadership ------------------------------------------------------

    def is_leader(self):
        """Whether this manager holds (or just took) the leader lock.

        A lock this manager cannot check (the bus does not answer) is kept
        and checked again next round, without acting meanwhile: its client
        may keep its lease alive, and forgetting it would keep every
        manager, this one included, from leading once the bus answers.
        One found lost is released, which deletes its key only if it is
        still this manager's.
        """
        if self.leader_lock is None:
            return True
        try:
            if self._leader is not None:
                if statebus.still_owner(self._leader):
                    return True
                LOG.warning('This pool manager lost the lead')
                self.resign()
            lock = self.leader_lock(LEADER_LOCK)
            if lock.acquire(blocking=False):
                self._leader = lock
                LOG.info('This pool manager is the leader now')
                return True
        except Exception as exc:
            LOG.warning('Cannot reach the state bus for leadership: %s', exc)
        return False

    def resign(self):
        """Release the leader lock, if held (best effort)."""
        leader, self._leader = self._leader, None
        if leader is not None:
            try:
                leader.release()
            except Exception:
                pass

    # -- the service -----------------------------------------------------

    def _listener(self):
        if self.listener is None:
            opts = self.conf.mlaccel_launcher
            self.listener = ready_listener.ReadinessListener(
                self.launch_options.get('listen_host', opts.listen_host),
                self.launch_options.get('listen_port', opts.listen_port),
                self.launch_options.get('callback_host', opts.callback_host),
                cert_file=opts.tls_cert_file, key_file=opts.tls_key_file)
        self.listener.start()
        return self.listener

    def run(self):
        """Tend the pools every ``interval`` seconds until :meth:`stop`."""
        loop = periodic.Periodic(
            'mlaccel-pool-manager', lambda: self.group.interval, self._round,
            stop_event=self.stop_event)
        try:
            loop.run()
        finally:
            self.resign()
            if self._own_listener and self.listener is not None:
                self.listener.stop()

    def stop(self):
        """End :meth:`run` soon: members being built are deleted, not kept.

        A build waits for its member's daemon up to ``build_timeout``; a
        stop ends the wait within a second, and the build deletes its VM
        through Nova before the round ends.
        """
        self.stop_event.set()

    def _round(self):
        if self.is_leader():
            self.run_once()

    def run_once(self):
        """One round over every pool; a failing pool does not stop others.

        With ``[mlaccel_pool] learn``, the learned pools are planned first
        (made, given their targets, retired).
        """
        if self.group.learn:
            try:
                # Launchers record demand only into a store that exists.
                self.store.ensure()
                self.learner().plan()
            except pool_store.PoolUnavailable as exc:
                LOG.warning('Learned pools not planned this round: %s', exc)
            except Exception:
                LOG.exception('Planning the learned pools failed')
        for key in self.store.keys():
            if self.stop_event.is_set():
                return
            try:
                self.tend(key)
            except pool_store.PoolUnavailable as exc:
                LOG.warning('Pool %s skipped this round: %s', key, exc)
            except Exception:
                LOG.exception('Tending pool %s failed', key)

    def tend(self, key):
        """Reconcile, check and size pool ``key``; False if not ours."""
        why = self._not_ours(key)
        if why is not None:
            if self._skipped.get(key) != why:
                LOG.error('Pool %s is not tended: %s', key, why)
            self._skipped[key] = why
            return False
        self._skipped.pop(key, None)
        self.reconcile(key)
        self.check(key)
        self.resize(key)
        return True

    def learner(self):
        """The :class:`~mlaccel.pool.learning.Learner` of this project."""
        project = self.project_id or claims.project_of(
            self.conn, self.group.project_id)
        if not project:
            raise pool_store.PoolUnavailable(
                'the project of the manager\'s credentials is unknown')
        if self._learner is None or self._learner.project_id != project:
            self._learner = learning.Learner(self.store, self.conf, project,
                                             self._visible)
        return self._learner

    def _image_visible(self, image_id):
        """Whether this project can boot ``image_id`` (Glance shows it)."""
        try:
            return self.conn.image.find_image(
                image_id, ignore_missing=True) is not None
        except Exception as exc:
            LOG.warning('Cannot check image %s in Glance: %s', image_id, exc)
            return False

    def _not_ours(self, key):
        """Why pool ``key`` is not this manager's to tend, or ``None``."""
        project = self.project_id or claims.project_of(
            self.conn, self.group.project_id)
        if not project:
            return ('the project of the manager\'s credentials is unknown '
                    '(set [mlaccel_pool] project_id)')
        owner = pool_store.spec_of(self.store.read(key)).project_id
        if owner != project:
            return 'it belongs to project %s, not to %s' % (owner, project)
        return None

    # -- reconcile -------------------------------------------------------

    def _listed(self, key):
        return {s.id: s for s in self.conn.compute.servers(
            details=True, name=pool_members.name_filter(key))}

    def reconcile(self, key):
        """Make the store and Nova agree; return what changed."""
        listed = self._listed(key)
        now = time.time()
        dropped, orphans, expired = [], [], []
        with self.store.transaction(key) as state:
            for server_id, member in list(state['members'].items()):
                server = listed.get(server_id)
                if server is None or server.status in GONE:
                    dropped.append(server_id)
                elif member['state'] == pool_store.CLAIMED and \
                        member['claim_deadline'] < now:
                    expired.append(server_id)
                else:
                    continue
                pool_store.end_idle(state, member, now)
                del state['members'][server_id]
                state['stats']['deleted'] += 1
            orphans = [sid for sid, s in listed.items()
                       if sid not in state['members']
                       and s.status not in ('DELETED', 'SOFT_DELETED')
                       and s.task_state != 'deleting']
        for server_id in expired + orphans + [
                sid for sid in dropped if sid in listed]:
            pool_members.delete(self.conn, server_id)
        if dropped or orphans or expired:
            LOG.info('Pool %s reconciled: dropped %s, orphans deleted %s, '
                     'expired claims %s', key, dropped, orphans, expired)
        return {'dropped': dropped, 'orphans': orphans, 'expired': expired}

    # -- health ----------------------------------------------------------

    def check(self, key):
        """Check idle members; delete those failing too often."""
        state = self.store.read(key)
        idle = pool_store.members(state, pool_store.IDLE)
        if not idle:
            return []
        with concurrent.futures.ThreadPoolExecutor(
                min(len(idle), 16),
                thread_name_prefix='mlaccel-pool-health') as workers:
            verdicts = list(workers.map(
                lambda m: pool_members.idle_health(
                    m, timeout=self.group.health_timeout), idle))
        now = time.time()
        retired = []
        with self.store.transaction(key) as state:
            for seen, why in zip(idle, verdicts):
                member = state['members'].get(seen['server_id'])
                # Claimed meanwhile (its token changed): not ours to judge.
                if member is None or member['state'] != pool_store.IDLE \
                        or member['token'] != seen['token']:
                    continue
                if why is None:
                    member['health_failures'] = 0
                    continue
                member['health_failures'] += 1
                LOG.warning('Pool member %s failed a health check (%d): %s',
                            member['server_id'], member['health_failures'],
                            why)
                if member['health_failures'] >= self.group.health_failures:
                    pool_store.end_idle(state, member, now)
                    del state['members'][member['server_id']]
                    state['stats']['deleted'] += 1
                    retired.append(member['server_id'])
        for server_id in retired:
            pool_members.delete(self.conn, server_id)
        return retired

    # -- size ------------------------------------------------------------

    def resize(self, key):
        """Create or delete idle members to reach the target size."""
        now = time.time()
        surplus = []
        with self.store.transaction(key) as state:
            state['stats']['arrivals'] = sizing.prune(
                state['stats']['arrivals'], now,
                max(self.group.arrival_window, 1.0))
            size = target(state, self.group, now)
            idle = pool_store.members(state, pool_store.IDLE)
            missing = size - len(idle)
            if missing < 0:
                for member in idle[:-missing]:
                    pool_store.end_idle(state, member, now)
                    del state['members'][member['server_id']]
                    state['stats']['deleted'] += 1
                    surplus.append(member['server_id'])
            spec = pool_store.spec_of(state)
        for server_id in surplus:
            pool_members.delete(self.conn, server_id)
        if missing > 0:
            self.refill(key, spec, missing)
        return missing

    def refill(self, key, spec, count):
        """Create ``count`` members; return how many became warm.

        A build that fails, or that :meth:`stop` ends, leaves no VM behind
        (:func:`mlaccel.pool.members.build`); a failure backs the pool off,
        a stop does not.
        """
        listener = self._listener()
        stopped = []   # seconds of the builds a stop of the manager ended

        def one(_):
            started = time.monotonic()
            try:
                return pool_members.build(
                    self.conn, spec, listener=listener, conf=self.conf,
                    timeout=self.group.build_timeout, cancel=self.stop_event,
                    **self.launch_options)
            except KeyboardInterrupt:
                # The manager is stopping: the build deleted its VM.
                stopped.append(time.monotonic() - started)
                return None
            except Exception as exc:
                LOG.warning('Creating a member of pool %s failed: %s',
                            key, exc)
                # What the failed attempt cost (its VM deleted since).
                return time.monotonic() - started

        with concurrent.futures.ThreadPoolExecutor(
                min(count, self.group.refill_parallelism),
                thread_name_prefix='mlaccel-pool-build') as workers:
            built = list(workers.map(one, range(count)))
        made = [m for m in built if isinstance(m, dict)]
        lost = [s for s in built if isinstance(s, float)]
        failed = len(lost)
        extra = []
        with self.store.transaction(key) as state:
            stats = state['stats']
            # A failed build's seconds are member VM-seconds too.
            stats['failed_build_vm_s'] = stats.get(
                'failed_build_vm_s', 0.0) + sum(lost)
            stats['build_vm_s'] = stats.get('build_vm_s', 0.0) + sum(
                lost) + sum(stopped)
            for member in made:
                if len(pool_store.members(state, pool_store.IDLE)) >= \
                        state['bounds']['max']:
                    extra.append(member['server_id'])  # bounds lowered
                    continue
                lead = member.pop('lead_time_s')
                stats['lead_time_s'] = sizing.lead_time(
                    stats['lead_time_s'], lead)
                # Its VM-seconds before it was warm: build, boot, preload.
                stats['build_vm_s'] = stats.get('build_vm_s', 0.0) + lead
                state['members'][member['server_id']] = member
                stats['created'] += 1
            if failed:
                stats['create_failures'] += failed
                rounds = stats.get('failed_rounds', 0) + 1
                pause = backoff(self.group, rounds)
                stats['failed_rounds'] = rounds
                stats['capacity_until'] = time.time() + pause
            else:
                stats['failed_rounds'] = 0
        for server_id in extra:
            pool_members.delete(self.conn, server_id)
        if stopped:
            LOG.info('Pool %s: %d member build(s) ended by the manager\'s '
                     'stop, their VMs deleted', key, len(stopped))
        if failed:
            LOG.warning('Pool %s: %d of %d creations failed (%d refill(s) '
                        'in a row); the pool does not grow for %.0f s', key,
                        failed, count, rounds, pause)
        return len(made)
