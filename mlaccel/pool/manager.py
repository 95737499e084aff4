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

The service's rounds never wait for a build: members are built in the
background (a refill ``refill_parallelism`` at a time), counted towards
their pool's size while they are, so a build of minutes delays no other
pool's refill, no health check and no learning. A server of a pool
with builds in flight is not taken for an orphan (it is in Nova before it
is in the store); the next round without builds judges it. A learned
pool is retired only once it has no build in flight and Nova lists none of
its servers (:meth:`PoolManager.lingering`): until then its rounds go on
deleting what is left. Builds a pool no longer needs are ended, as a stop
ends them all; each deletes its VM.

Idle VM-seconds are counted once, when a member stops being idle (claimed
or deleted); ``idle_vm_s / tasks_served`` is the idle cost per task served.
Changes go through :meth:`mlaccel.pool.store.PoolStore.transaction`, so a
manager killed at any point leaves nothing counted twice.
"""

import collections
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
        # Members being built, by pool key, and the threads building them.
        # A pool's lock orders this manager's own changes to it: a member
        # recorded between a reconcile's listing and its reading of the
        # store would be taken for one Nova lost.
        self._guard = threading.Lock()
        self._building = collections.Counter()
        self._builders = set()
        # The cancel events of the builds in flight, by pool key.
        self._cancels = collections.defaultdict(set)
        self._pool_locks = collections.defaultdict(threading.Lock)
        self._listener_lock = threading.Lock()

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
        with self._listener_lock:
            if self.listener is None:
                opts = self.conf.mlaccel_launcher
                self.listener = ready_listener.ReadinessListener(
                    self.launch_options.get('listen_host', opts.listen_host),
                    self.launch_options.get('listen_port', opts.listen_port),
                    self.launch_options.get('callback_host',
                                            opts.callback_host),
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
            # The builds see the stop and delete their VMs.
            self.wait_builds()
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
        self._cancel()

    def _cancel(self, key=None):
        """End the builds in flight of pool ``key``, or of every pool."""
        with self._guard:
            events = [event for k, found in self._cancels.items()
                      if key is None or k == key for event in found]
        for event in events:
            event.set()

    def _round(self):
        if self.is_leader():
            self.run_once(wait=False)

    def run_once(self, wait=True):
        """One round over every pool; a failing pool does not stop others.

        With ``[mlaccel_pool] learn``, the learned pools are planned first
        (made, given their targets, retired). Every pool's builds start
        before any is waited for; with ``wait`` the round returns once they
        are done, else they go on in the background (the service's rounds).
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
                break
            try:
                self.tend(key, wait=False)
            except pool_store.PoolUnavailable as exc:
                LOG.warning('Pool %s skipped this round: %s', key, exc)
            except Exception:
                LOG.exception('Tending pool %s failed', key)
        if wait:
            self.wait_builds()

    def tend(self, key, wait=True):
        """Reconcile, check and size pool ``key``; False if not ours.

        ``wait``: see :meth:`resize`.
        """
        why = self._not_ours(key)
        if why is not None:
            if self._skipped.get(key) != why:
                LOG.error('Pool %s is not tended: %s', key, why)
            self._skipped[key] = why
            return False
        self._skipped.pop(key, None)
        self.reconcile(key)
        self.check(key)
        self.resize(key, wait=wait)
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
                                             self._visible, self.lingering,
                                             self.building)
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
        with self._pool_lock(key):
            return self._reconcile(key)

    def _reconcile(self, key):
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
            # A member being built is in Nova before it is in the store.
            orphans = [] if self.building(key) else [
                sid for sid, s in listed.items()
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

    def resize(self, key, wait=True):
        """Create or delete idle members to reach the target size.

        Members being built count towards it. With ``wait``, returns once
        the builds it starts are done; else they go on in the background
        (:meth:`wait_builds`). Returns the members it started building, or
        minus those it deleted.
        """
        now = time.time()
        surplus = []
        missing = 0
        with self._pool_lock(key), self.store.transaction(key) as state:
            state['stats']['arrivals'] = sizing.prune(
                state['stats']['arrivals'], now,
                max(self.group.arrival_window, 1.0))
            size = target(state, self.group, now)
            idle = pool_store.members(state, pool_store.IDLE)
            if len(idle) > size:
                for member in idle[:len(idle) - size]:
                    pool_store.end_idle(state, member, now)
                    del state['members'][member['server_id']]
                    state['stats']['deleted'] += 1
                    surplus.append(member['server_id'])
            missing = size - len(idle) - self.building(key)
            if self.stop_event.is_set():
                missing = 0
            spec = pool_store.spec_of(state)
            if missing > 0:
                # Counted before the builds start: the next round sees them.
                self._count(key, missing)
        if size <= len(idle) and self.building(key):
            # Its bounds or its target fell: none of its builds is needed.
            LOG.info('Pool %s needs no more members: ending the %d build(s) '
                     'in flight', key, self.building(key))
            self._cancel(key)
        for server_id in surplus:
            pool_members.delete(self.conn, server_id)
        if missing > 0:
            if wait:
                self.refill(key, spec, missing, counted=True)
            else:
                self._refill_in_background(key, spec, missing)
        return missing if missing > 0 else -len(surplus)

    def building(self, key):
        """Members of pool ``key`` this manager is building now."""
        with self._guard:
            return self._building[key]

    def lingering(self, key):
        """Whether anything of pool ``key`` is in the cloud but its members.

        Builds in flight, or servers Nova lists under the pool's name (an
        orphan the next reconcile deletes, a member being deleted): a
        learned pool is retired only once none is left, so nothing of it
        outlives the manager's care. A listing that fails counts as one.
        """
        if self.building(key):
            return True
        try:
            left = [s.id for s in self._listed(key).values()
                    if s.status not in ('DELETED', 'SOFT_DELETED')]
        except Exception as exc:
            LOG.warning('Cannot list the servers of pool %s: %s', key, exc)
            return True
        if left:
            LOG.info('Pool %s is not retired yet: Nova still lists its '
                     'servers %s', key, left)
        return bool(left)

    def wait_builds(self):
        """Return once every build started in the background is done."""
        while True:
            with self._guard:
                builders = list(self._builders)
            if not builders:
                return
            for thread in builders:
                thread.join()

    def _count(self, key, change):
        with self._guard:
            self._building[key] += change
            if self._building[key] <= 0:
                del self._building[key]

    def _pool_lock(self, key):
        with self._guard:
            return self._pool_locks[key]

    def _refill_in_background(self, key, spec, count):
        def run():
            try:
                self.refill(key, spec, count, counted=True)
            except Exception:
                LOG.exception('Refilling pool %s failed', key)
            finally:
                with self._guard:
                    self._builders.discard(thread)

        thread = threading.Thread(target=run, name='mlaccel-pool-refill')
        with self._guard:
            self._builders.add(thread)
        try:
            thread.start()
        except BaseException:
            with self._guard:
                self._builders.discard(thread)
            self._count(key, -count)
            raise

    def refill(self, key, spec, count, counted=False):
        """Create ``count`` members; return how many became warm.

        A build that fails, or that :meth:`stop` ends, leaves no VM behind
        (:func:`mlaccel.pool.members.build`); a failure backs the pool off,
        a stop does not. The builds count in :meth:`building` until their
        members are in the store (``counted``: the caller counted them).
        """
        if not counted:
            self._count(key, count)
        try:
            built, stopped = self._build(key, spec, count)
        except BaseException:
            self._count(key, -count)
            raise
        return self._record(key, count, built, stopped)

    def _build(self, key, spec, count):
        """Build ``count`` members at once; ``(built, stopped)``.

        ``built``: per build, its member's record, or the seconds a failed
        one cost; ``stopped``: the seconds of each build ended by the
        manager's stop or by the pool needing no more (:meth:`_cancel`).
        """
        listener = self._listener()
        stopped = []
        cancel = threading.Event()
        with self._guard:
            self._cancels[key].add(cancel)
        if self.stop_event.is_set():   # stopped before it was registered
            cancel.set()

        def one(_):
            started = time.monotonic()
            try:
                return pool_members.build(
                    self.conn, spec, listener=listener, conf=self.conf,
                    timeout=self.group.build_timeout, cancel=cancel,
                    **self.launch_options)
            except KeyboardInterrupt:
                # Cancelled: the build deleted its VM.
                stopped.append(time.monotonic() - started)
                return None
            except Exception as exc:
                LOG.warning('Creating a member of pool %s failed: %s',
                            key, exc)
                # What the failed attempt cost (its VM deleted since).
                return time.monotonic() - started

        try:
            with concurrent.futures.ThreadPoolExecutor(
                    min(count, self.group.refill_parallelism),
                    thread_name_prefix='mlaccel-pool-build') as workers:
                return list(workers.map(one, range(count))), stopped
        finally:
            with self._guard:
                self._cancels[key].discard(cancel)
                if not self._cancels[key]:
                    del self._cancels[key]

    def _record(self, key, count, built, stopped):
        """Put the built members in the store; they stop counting as built."""
        made = [m for m in built if isinstance(m, dict)]
        lost = [s for s in built if isinstance(s, float)]
        failed = len(lost)
        extra = []
        with self._pool_lock(key):
            try:
                with self.store.transaction(key) as state:
                    rounds = self._add_members(state, made, lost, stopped,
                                               extra)
            except pool_store.NoSuchPool:
                # Removed while they were built: nobody would tend them.
                LOG.info('Pool %s was removed while %d member(s) were '
                         'built: deleting them', key, len(made))
                made, failed = [], 0
                extra = [m['server_id'] for m in built if isinstance(m, dict)]
            except pool_store.PoolUnavailable as exc:
                # Unrecorded, their tokens would be lost with them.
                LOG.warning('Pool %s: %d built member(s) cannot be recorded '
                            '(%s): deleting them', key, len(made), exc)
                made, failed = [], 0
                extra = [m['server_id'] for m in built if isinstance(m, dict)]
            finally:
                self._count(key, -count)
        for server_id in extra:
            pool_members.delete(self.conn, server_id)
        if stopped:
            LOG.info('Pool %s: %d member build(s) ended by the manager\'s '
                     'stop or as no longer needed, their VMs deleted', key,
                     len(stopped))
        if failed:
            LOG.warning('Pool %s: %d of %d creations failed (%d refill(s) '
                        'in a row); the pool does not grow for %.0f s', key,
                        failed, count, rounds,
                        backoff(self.group, rounds))
        return len(made)

    def _add_members(self, state, made, lost, stopped, extra):
        """Record a refill in ``state``; the failed refills in a row."""
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
        if lost:
            stats['create_failures'] += len(lost)
            stats['failed_rounds'] = stats.get('failed_rounds', 0) + 1
            stats['capacity_until'] = time.time() + backoff(
                self.group, stats['failed_rounds'])
        else:
            stats['failed_rounds'] = 0
        return stats['failed_rounds']
