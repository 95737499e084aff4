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

"""Warm pools on the all-in-one cloud, kept by its pool manager service.

Needs a running cloud (``python -m mlaccel_lab.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise. Real parts: Nova, Glance and the
state bus of the cloud, ``mlaccel-pool-manager`` running as a service of
it, members' task daemons as guest processes of the test virt driver.
Every test makes an image of its own, so its pool is its own. Faults are
made for real: a member's guest process killed or stopped (SIGSTOP), the
project's instance quota lowered, a launcher given a state bus nobody
listens on, a second manager started beside the cloud's.
"""

import concurrent.futures
import logging
import os
import signal
import socket
import time
import uuid

import fixtures
from oslo_config import cfg
import testtools

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.pool import claims
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import demand
from mlaccel.pool import learning
from mlaccel.pool import members as pool_members
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.tempest import guests
from mlaccel_lab.testing.aio import fixture
from mlaccel_lab.testing.aio import pools
from mlaccel_lab.testing.aio import procs

WAIT = 300
SECOND = pools.SERVICE + '-2'


def guest_pids(server_id):
    """Pids of the member's guest: its task daemon and anything it runs."""
    return guests.with_environ('MLACCEL_INSTANCE_UUID', server_id)


def signal_guest(server_id, signum):
    for pid in guest_pids(server_id):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def dead_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class PoolCloudBase(testtools.TestCase):
    """Helpers of the tests below; no test of its own."""

    #: The tests change what the whole cloud sees (the manager, the
    #: project's quota): they run alone.
    exclusive = False

    def setUp(self):
        super().setUp()
        self.aio = self.useFixture(fixture.RunningCloud(self.exclusive))
        self.lay = self.aio.layout
        if not procs.running(self.lay, pools.SERVICE):
            self.fail('the cloud runs no pool manager')
        self.conn = self.aio.connect()
        self.conf = self.load_conf()
        self.store = pool_cli.open_store(self.conf)
        self.addCleanup(self.store.lock.stop)

    def load_conf(self, *more_files):
        conf = cfg.ConfigOpts()
        mlaccel_conf.register_opts(conf)
        conf([], project='mlaccel', default_config_files=[
            pools.config_file(self.lay)] + list(more_files))
        return conf

    def wait(self, predicate, what, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail('timed out after %s s waiting for %s'
                          % (timeout, what))
            time.sleep(0.5)

    def new_spec(self):
        """A spec for launches of a new image, deleted after the test."""
        image = self.conn.image.create_image(
            name='mlaccel-pool-test-%s' % uuid.uuid4().hex[:8],
            data=os.urandom(1 << 20), disk_format='raw',
            container_format='bare')
        self.addCleanup(self.conn.image.delete_image, image,
                        ignore_missing=True)
        launcher = self.conf.mlaccel_launcher
        return pool_spec.PoolSpec(
            claims.project_of(self.conn), image.id,
            self.aio.cloud['flavor_id'], preload=launcher.preload,
            network='none', taskd_port=launcher.taskd_port)

    def make_pool(self, size, max_tasks=2):
        """A pool of ``size`` members for a new image; emptied after."""
        spec = self.new_spec()
        with self.store.transaction(spec.key, create=pool_store.new_state(
                spec, size, size, max_tasks)):
            pass
        self.addCleanup(self.remove_pool, spec.key)
        return spec

    def state_when(self, key, predicate, what):
        """The pool's state once ``predicate(state)`` holds."""
        return self.wait(lambda: (lambda state: predicate(state) and state)(
            self.store.read(key)), what)

    def set_bounds(self, key, size):
        with self.store.transaction(key) as state:
            state['bounds'] = {'min': size, 'max': size}

    def remove_pool(self, key):
        self.set_bounds(key, 0)
        self.wait(lambda: not self.store.read(key)['members'],
                  'the pool to empty')
        self.wait(lambda: not self.servers(key), 'its servers to go')
        self.store.delete(key)

    def servers(self, key):
        """Ids of the servers Nova lists as members of pool ``key``."""
        return {s.id for s in self.conn.compute.servers(
            name=pool_members.name_filter(key))
            if s.status not in ('DELETED', 'SOFT_DELETED')}

    def idle(self, key):
        return [m['server_id'] for m in pool_store.members(
            self.store.read(key), pool_store.IDLE)]

    def settled(self, key, size):
        """Exactly ``size`` members, all idle, and Nova lists just them."""
        idle = set(self.idle(key))
        return (len(idle) == size and idle == self.servers(key)
                and len(self.store.read(key)['members']) == size)

    def assert_counted(self, key):
        """Every member made is counted once: made - deleted = held.

        The manager may be refilling (a server Nova lists, not yet
        recorded) or retiring (recorded gone, Nova still deleting): wait
        until Nova lists exactly the recorded members.
        """
        state = self.wait(
            lambda: (lambda s: s if set(s['members']) == self.servers(key)
                     else None)(self.store.read(key)),
            'Nova to list exactly the members of pool %s' % key)
        stats = state['stats']
        self.assertEqual(len(state['members']),
                         stats['created'] - stats['deleted'], stats)

    def assert_gone(self, server_ids):
        """Nova soon lists none of ``server_ids`` (no orphan left).

        A delete Nova accepted finishes in the background: wait for it.
        """
        def left():
            listed = {s.id for s in self.conn.compute.servers()}
            return set(server_ids) & listed
        self.wait(lambda: not left(), 'Nova to delete %s' % (
            ', '.join(sorted(server_ids)) or 'nothing'))

    def assert_replaced(self, key, old):
        """One warm member again, not ``old``, which Nova lists no more."""
        self.wait(lambda: self.settled(key, 1)
                  and old not in self.servers(key),
                  'member %s replaced' % old)
        self.assert_gone([old])
        self.assert_counted(key)

    def claimer(self, store=None):
        return claims.Claimer(
            store or self.store, self.conn,
            timeout=self.conf.mlaccel_pool.health_timeout)

    def launch(self, spec, count=1, claimer=None):
        result = api.launch(
            self.conn, spec.image_id, spec.flavor_id, count, 'clip',
            {'steps': 2, 'seed': 1}, network='none', timeout=WAIT,
            conf=self.conf, submit_options={'threads': 1, 'seed': 1},
            warm_pool=claimer or self.claimer())
        self.assertEqual([], result['cleanup'].get('leaked', []))
        self.assert_gone(result['cleanup'].get('deleted', []))
        return result

    def fresh(self, result):
        """Ids of the launch's VMs that no pool gave it."""
        return sorted(vm['server_id'] for vm in result['vms']
                      if vm['pool'] is None)


class PoolOnCloudTest(PoolCloudBase):

    def test_refill_claim_and_return(self):
        spec = self.make_pool(2)
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        members = set(self.idle(spec.key))
        self.assertTrue(self.conf.mlaccel_launcher.notification_url)
        logged = self.useFixture(fixtures.FakeLogger(
            name='mlaccel.launcher.api', level=logging.WARNING))
        result = self.launch(spec)
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        # A member's build notifications went by before the launch
        # listened: the launch does not wait for them.
        self.assertNotIn('notifications did not arrive', logged.output)
        vm, = result['vms']
        self.assertEqual(spec.key, vm['pool'])
        self.assertIn(vm['server_id'], members)
        # Returned after its task (reuse allows two), not deleted. The
        # manager may refill during the claim and trim the surplus after,
        # so which members stay is its choice; the count is not.
        self.assertIn(vm['server_id'], result['cleanup'].get('returned'))
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        self.assertEqual(1, self.store.read(spec.key)['stats']
                         ['tasks_served'])
        self.assert_counted(spec.key)

    def test_launchers_racing_for_the_last_members(self):
        spec = self.make_pool(2, max_tasks=1)
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        members = set(self.idle(spec.key))
        with concurrent.futures.ThreadPoolExecutor(3) as workers:
            results = list(workers.map(lambda _: self.launch(spec),
                                       range(3)))
        for result in results:
            self.assertEqual(api.SUCCEEDED, result['outcome'],
                             result['error'])
        pooled = [r['vms'][0]['server_id'] for r in results
                  if r['vms'][0]['pool'] == spec.key]
        # Each member went to exactly one launch; the third made its own.
        self.assertEqual(sorted(members), sorted(pooled))
        # Used up (one task each): deleted and refilled with new members.
        self.wait(lambda: self.settled(spec.key, 2)
                  and not members & set(self.idle(spec.key)),
                  'two new members')
        self.assert_counted(spec.key)

    def test_dead_guest_is_never_handed_to_a_task(self):
        spec = self.make_pool(1)
        self.wait(lambda: self.settled(spec.key, 1), 'a warm member')
        dead, = self.idle(spec.key)
        signal_guest(dead, signal.SIGKILL)
        self.wait(lambda: not guest_pids(dead), 'the guest to die')
        # Nova still says ACTIVE; the claim's hand-over finds no daemon,
        # deletes the member and creates the VM fresh.
        result = self.launch(spec)
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        vm, = result['vms']
        self.assertNotEqual(dead, vm['server_id'])
        self.assertEqual(2, vm['result']['steps'])
        self.assert_replaced(spec.key, dead)

    def test_hung_daemon_is_detected_and_replaced(self):
        spec = self.make_pool(1)
        self.wait(lambda: self.settled(spec.key, 1), 'a warm member')
        hung, = self.idle(spec.key)
        signal_guest(hung, signal.SIGSTOP)
        self.addCleanup(signal_guest, hung, signal.SIGCONT)
        # The manager's health checks time out: it retires the member
        # without anyone having claimed it.
        state = self.state_when(spec.key,
                                lambda s: hung not in s['members'],
                                'the hung member retired')
        self.assertEqual(0, state['stats']['claimed'])
        self.assert_replaced(spec.key, hung)
        result = self.launch(spec)
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        vm, = result['vms']
        self.assertEqual(spec.key, vm['pool'])
        self.assertNotEqual(hung, vm['server_id'])
        self.assert_counted(spec.key)

    def test_member_failing_its_first_submit_is_replaced(self):
        spec = self.make_pool(1)
        self.wait(lambda: self.settled(spec.key, 1), 'a warm member')
        member, = self.idle(spec.key)
        claimer = self.claimer()
        claim = claimer.claim

        def claim_then_crash(launch, *ids):
            got = claim(launch, *ids)
            # Handed over, then dead before the task reaches it.
            signal_guest(member, signal.SIGKILL)
            return got
        claimer.claim = claim_then_crash
        result = self.launch(spec, claimer=claimer)
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        vm, = result['vms']
        self.assertNotEqual(member, vm['server_id'])
        self.assertEqual(2, vm['result']['steps'])
        self.assertEqual([vm['server_id']], result['cleanup']['deleted'])
        self.assert_replaced(spec.key, member)

    def test_bus_down_creates_fresh_and_claims_nothing(self):
        spec = self.make_pool(1)
        self.wait(lambda: self.settled(spec.key, 1), 'a warm member')
        member, = self.idle(spec.key)
        # A launcher whose state bus is down (nothing listens there),
        # beside one whose bus is up, both wanting the one member.
        # (A file, not set_override: overrides reach every ConfigOpts
        # that registered the same option groups.)
        dead = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'dead-bus.conf')
        with open(dead, 'w') as f:
            f.write('[mlaccel_statebus]\nbackend_url = '
                    'redis://127.0.0.1:%d?timeout=2\n' % dead_port())
        down_conf = self.load_conf(dead)
        self.assertNotEqual(down_conf.mlaccel_statebus.backend_url,
                            self.conf.mlaccel_statebus.backend_url)
        down_store = pool_store.PoolStore(
            self.conf.mlaccel_pool.state_dir,
            lock=pool_store.BusLocks(down_conf), lock_timeout=2.0)
        self.addCleanup(down_store.lock.stop)
        with concurrent.futures.ThreadPoolExecutor(2) as workers:
            down, up = workers.map(
                lambda claimer: self.launch(spec, claimer=claimer),
                (self.claimer(down_store), self.claimer()))
        for result in (down, up):
            self.assertEqual(api.SUCCEEDED, result['outcome'],
                             result['error'])
        self.assertEqual([down['vms'][0]['server_id']], self.fresh(down))
        self.assertEqual(down['cleanup']['deleted'], self.fresh(down))
        self.assertEqual([], self.fresh(up))
        self.assertEqual(member, up['vms'][0]['server_id'])
        stats = self.store.read(spec.key)['stats']
        self.assertEqual(1, stats['claimed'])
        self.assertEqual(1, stats['asked'])
        self.wait(lambda: self.settled(spec.key, 1), 'a warm member')
        self.assert_counted(spec.key)


class PoolFaultsOnCloudTest(PoolCloudBase):
    """Faults of the manager or the whole project: one test at a time."""

    exclusive = True

    def restart_manager(self):
        if not procs.running(self.lay, pools.SERVICE):
            pools.start_manager(self.lay)

    def test_manager_killed_mid_refill_reconciles(self):
        spec = self.make_pool(2)
        # Killed as soon as Nova has a member the manager is building.
        self.wait(lambda: self.servers(spec.key), 'a member being built',
                  timeout=120)
        procs.stop(self.lay, pools.SERVICE, timeout=0)
        self.addCleanup(self.restart_manager)
        self.restart_manager()
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        # Nothing orphaned, nothing counted twice: Nova's members are the
        # store's, two of them.
        self.assertEqual(set(self.idle(spec.key)), self.servers(spec.key))
        self.assert_counted(spec.key)

    def test_only_the_leader_acts(self):
        logs = {}
        for name in (pools.SERVICE, SECOND):
            path = procs.log_path(self.lay, name)
            logs[name] = (path, os.path.getsize(path)
                          if os.path.exists(path) else 0)

        def took_lead(name):
            """Whether ``name`` became the leader during this test."""
            path, offset = logs[name]
            with open(path, errors='replace') as f:
                f.seek(offset)
                return 'is the leader now' in f.read()

        pools.start_manager(self.lay, SECOND)
        self.addCleanup(procs.stop, self.lay, SECOND)
        spec = self.make_pool(2)
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        # Rounds of both managers after the refill: had the follower acted
        # too, it would have made members of its own (or deleted the
        # leader's as strangers).
        time.sleep(3 * self.conf.mlaccel_pool.interval)
        self.assertTrue(procs.running(self.lay, SECOND))
        self.assertTrue(self.settled(spec.key, 2))
        stats = self.store.read(spec.key)['stats']
        self.assertEqual((2, 0), (stats['created'], stats['deleted']))
        # The cloud's manager leads unless it was waiting for a killed
        # manager's lock to expire when the second one started.
        leader, follower = pools.SERVICE, SECOND
        if took_lead(SECOND):
            leader, follower = follower, leader
        self.assertFalse(took_lead(follower))
        # The leader stops: the follower takes over and acts.
        procs.stop(self.lay, leader)
        self.addCleanup(self.restart_manager)
        self.wait(lambda: took_lead(follower), 'the follower to lead',
                  timeout=60)
        self.set_bounds(spec.key, 3)
        self.wait(lambda: self.settled(spec.key, 3), 'three warm members')
        self.assertEqual(3, self.store.read(spec.key)['stats']['created'])
        self.assert_counted(spec.key)

    def set_instance_quota(self, instances):
        self.conn.set_compute_quotas(self.conn.current_project_id,
                                     instances=instances)

    def test_over_quota_the_pool_shrinks_and_tasks_run_fresh(self):
        project = self.conn.current_project_id
        before = self.conn.get_compute_quotas(project)['instances']
        self.addCleanup(self.set_instance_quota, before)
        spec = self.make_pool(1, max_tasks=5)
        self.wait(lambda: self.settled(spec.key, 1), 'a warm member')
        member, = self.idle(spec.key)
        # The project may hold no more servers than it has now.
        used = len([s for s in self.conn.compute.servers()
                    if s.status not in ('DELETED', 'SOFT_DELETED')])
        self.set_instance_quota(used)
        self.set_bounds(spec.key, 2)
        state = self.state_when(spec.key,
                                lambda s: s['stats']['create_failures'],
                                'Nova to refuse a member')
        # The pool shrinks to what it holds and stops trying for the first
        # pause: rounds of the manager pass without a new attempt.
        summary = pool_cli.summary(state, self.conf.mlaccel_pool)
        self.assertEqual(1, summary['target'])
        self.assertEqual(1, state['stats']['failed_rounds'])
        interval = self.conf.mlaccel_pool.interval
        time.sleep(max(interval, min(
            3 * interval,
            state['stats']['capacity_until'] - time.time() - 2 * interval)))
        state = self.store.read(spec.key)
        self.assertEqual(1, state['stats']['create_failures'])
        self.assertEqual([member], list(state['members']))
        self.assertEqual({member}, self.servers(spec.key))
        # Capacity comes back, and the pool wants no more than it holds: a
        # task of two VMs takes the member and runs the other fresh.
        self.set_bounds(spec.key, 1)
        self.set_instance_quota(before)
        result = self.launch(spec, 2)
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        fresh = self.fresh(result)
        self.assertEqual(1, len(fresh))
        self.assertEqual(fresh, result['cleanup']['deleted'])
        self.assertEqual([member], result['cleanup']['returned'])
        self.assertTrue(self.settled(spec.key, 1))
        self.assertEqual(1, self.store.read(spec.key)['stats']
                         ['create_failures'])
        self.assert_counted(spec.key)


class LearnedPoolOnCloudTest(PoolCloudBase):
    """Pools nobody defined: the cloud's manager learns one from launches.

    The cloud's ``mlaccel-pool-manager`` is restarted with learning on for
    this test's project and, by the operator's allow-list, this test's new
    image only, with a budget of one member; the launches record their
    demand as ``mlaccel launch --pool`` does.
    """

    exclusive = True

    def manager_learning(self, spec):
        """Restart the cloud's manager learning ``spec``'s image only."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'learn.conf')
        with open(path, 'w') as f:
            f.write('[mlaccel_pool]\nlearn = true\nlearn_projects = %s\n'
                    'learn_images = %s\nbudget_members = 1\n'
                    'budget_idle_vm_hours = 24\n'
                    % (spec.project_id, spec.image_id))
        procs.stop(self.lay, pools.SERVICE)
        pools.start_manager(self.lay, more_config_files=[path])

    def manager_as_before(self):
        procs.stop(self.lay, pools.SERVICE)
        pools.start_manager(self.lay)

    def remove_learned_pool(self, key):
        """Empty and delete the pool, by the manager as it was before."""
        if self.store.exists(key):
            self.remove_pool(key)

    def test_a_launch_stream_with_no_pool_ends_served_by_a_learned_one(self):
        spec = self.new_spec()
        # Cleanups run last first: the manager as before, then the pool.
        self.addCleanup(self.remove_learned_pool, spec.key)
        self.addCleanup(self.manager_as_before)
        self.manager_learning(spec)
        store = self.store
        claimer = claims.Claimer(
            store, self.conn, project_id=spec.project_id,
            timeout=self.conf.mlaccel_pool.health_timeout,
            demand=demand.DemandLog.from_conf(store, self.conf))
        self.assertFalse(store.exists(spec.key))

        first = self.launch(spec, claimer=claimer)
        self.assertEqual(api.SUCCEEDED, first['outcome'], first['error'])
        self.assertEqual(1, len(self.fresh(first)))
        # The miss is recorded with its fresh overhead; the manager makes
        # a pool of it, and a warm member.
        self.wait(lambda: store.exists(spec.key)
                  and self.settled(spec.key, 1), 'a learned warm member')
        state = store.read(spec.key)
        self.assertTrue(learning.is_learned(state), state.get('origin'))
        member, = self.idle(spec.key)

        second = self.launch(spec, claimer=claimer)
        self.assertEqual(api.SUCCEEDED, second['outcome'], second['error'])
        vm, = second['vms']
        self.assertEqual((spec.key, member), (vm['pool'], vm['server_id']))
        doc = demand.DemandLog.from_conf(store, self.conf).read(
            spec.project_id)
        self.assertEqual([(1, 0), (1, 1)], [
            (asked, claimed) for _t, key, asked, claimed in doc['asks']
            if key == spec.key])
        self.assertGreater(doc['keys'][spec.key]['fresh_overhead_s'],
                           learning.CLAIM_SECONDS)
