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

"""Warm pools against Nova's in-process services, through openstacksdk.

Run with stestr or ``python -m testtools.run`` (not pytest), with
``OS_NOVA_DISABLE_EVENTLET_PATCHING=1`` for native threads and ``=0`` for
eventlet.
"""

import os
import signal
import threading
import time
import types

from oslo_config import cfg

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.pool import demand
from mlaccel.pool import members as pool_members
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.taskd import client
from mlaccel.taskd import protocol
from tests import fixtures as mlaccel_fixtures
from tests.functional.launcher import base
from tests.functional.launcher import guest
from tests.functional.pool import base as pool_base


class PoolTest(pool_base.PoolTestCase):

    def hang_members(self, key):
        """Pool ``key``'s members' guests never start (ACTIVE, silent).

        Each build would wait its whole ``build_timeout``, 600 s here.
        """
        self.flags(build_timeout=600.0, group='mlaccel_pool')
        self.useFixture(pool_base.fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.SILENT_SPAWN',
            _Prefix(pool_members.name_prefix(key))))

    def test_refill_claim_run_return(self):
        self.create_pool(2, 4, max_tasks=2)
        self.manager().run_once()
        idle = self.idle()
        self.assertEqual(2, len(idle))
        for member in idle:
            self.assertTrue(self.servers()[member['server_id']].name
                            .startswith(pool_members.name_prefix(self.key)))
            self.assertIsNone(pool_members.idle_health(member))
        before = {m['server_id']: m['token'] for m in idle}

        result = self.launch(3)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        # Two VMs came from the pool, one was created; all ran the task.
        self.assertEqual(sorted(before), result['cleanup']['returned'])
        self.assertEqual(1, len(result['cleanup']['deleted']))
        self.assertEqual({'succeeded'}, {vm['state'] for vm in result['vms']})
        for vm in result['vms']:
            durations = vm['timeline']['durations']
            self.assertEqual(self.key if vm['server_id'] in before else None,
                             vm['pool'])
            if vm['server_id'] in before:
                # Claim to first step is the pooled VM's buffering.
                self.assertEqual(0, durations['scheduling'])
                self.assertEqual(0, durations['creation'])
                self.assertAlmostEqual(
                    vm['observed']['first_step_at']
                    - vm['observed']['requested'], durations['buffering'],
                    places=3)

        state = self.state()
        self.assertEqual(2, state['stats']['tasks_served'])
        self.assertEqual(3, state['stats']['asked'])
        self.assertGreater(state['stats']['idle_vm_s'], 0)
        for member in self.idle():
            self.assertEqual(1, member['tasks'])
            # Claimed: the pool's old token no longer reaches the daemon.
            self.assertNotEqual(before[member['server_id']],
                                member['token'])
            with pool_members.connect(
                    member, token=before[member['server_id']]) as conn:
                err = self.assertRaises(client.TaskdError, conn.health)
                self.assertEqual(protocol.UNAUTHORIZED, err.code)
        self.assert_only_members_left()

        # Second task on the same members: max_tasks=2 retires them.
        result = self.launch(2)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual(sorted(before), result['cleanup']['retired'])
        self.assertEqual([], self.idle())
        self.assertEqual(4, self.state()['stats']['tasks_served'])
        self.wait_servers(lambda found: not found, 'every server gone')

    def test_every_launch_records_its_demand(self):
        """Asked, got, and what the fresh VMs cost, pool or no pool yet."""
        log = demand.DemandLog(self.store)
        result = self.launch(2)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        doc = log.read(pool_base.nova_fixtures.PROJECT_ID)
        [ask] = doc['asks']
        self.assertEqual([self.key, 2, 0], ask[1:])
        self.assertEqual(demand.MISS, demand.outcome(2, 0))
        entry = doc['keys'][self.key]
        self.assertEqual(self.spec, demand.spec_of(doc, self.key))
        self.assertEqual(2, entry['fresh_samples'])
        self.assertGreater(entry['fresh_overhead_s'], 0)

        self.create_pool(1, 1)
        self.manager().run_once()
        result = self.launch(2)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        doc = log.read(pool_base.nova_fixtures.PROJECT_ID)
        self.assertEqual([[self.key, 2, 0], [self.key, 2, 1]],
                         [ask[1:] for ask in doc['asks']])
        # Only the VM created fresh adds a sample.
        self.assertEqual(3, doc['keys'][self.key]['fresh_samples'])

    def test_fresh_overhead_is_recorded_while_the_task_runs(self):
        """A key is weighed while its first task still runs.

        The task runs until the test lets it end: the fresh VM's overhead
        is in the demand record before that, and counted once.
        """
        log = demand.DemandLog(self.store)
        go = os.path.join(self.useFixture(
            pool_base.fixtures.TempDir()).path, 'go')
        results = []
        worker = threading.Thread(target=lambda: results.append(api.launch(
            self.conn, base.IMAGE, base.FLAVOR, 1, base.WAIT_FOR_FILE,
            {'path': go}, preload=pool_base.PRELOAD,
            warm_pool=self.claimer(), timeout=60,
            **pool_base.LAUNCH_OPTIONS)), daemon=True)
        worker.start()
        self.addCleanup(worker.join, 60.0)
        self.addCleanup(lambda: open(go, 'a').close())

        def recorded():
            entry = log.read(pool_base.nova_fixtures.PROJECT_ID)[
                'keys'].get(self.key)
            return entry is not None and entry['fresh_samples']
        self._wait_until(recorded, 'the fresh overhead recorded')
        self.assertTrue(worker.is_alive(), 'the task ended already')
        open(go, 'a').close()
        worker.join(60.0)
        self.assertEqual('succeeded', results[0]['outcome'],
                         results[0]['error'])
        entry = log.read(pool_base.nova_fixtures.PROJECT_ID)['keys'][
            self.key]
        self.assertEqual(1, entry['fresh_samples'])
        self.assertGreater(entry['fresh_overhead_s'], 0)

    def test_sized_from_demand_and_shrinks_when_it_falls(self):
        self.create_pool(0, 5)
        now = time.time()
        with self.store.transaction(self.key) as state:
            # 60 VMs asked for in the last 600 s (0.1/s), 20 s to refill:
            # Little's law keeps 2 warm.
            state['stats']['arrivals'] = [[now - 10, 60]]
            state['stats']['lead_time_s'] = 20.0
        manager = self.manager()
        manager.run_once()
        self.assertEqual(2, len(self.idle()))
        # The measured lead time replaced part of the assumed one.
        self.assertLess(self.state()['stats']['lead_time_s'], 20.0)
        with self.store.transaction(self.key) as state:
            state['stats']['arrivals'] = []
        manager.run_once()
        state = self.state()
        self.assertEqual({}, state['members'])
        self.assertEqual(2, state['stats']['deleted'])
        self.assertGreater(state['stats']['idle_vm_s'], 0)
        self.wait_servers(lambda found: not found, 'the surplus deleted')

    def test_race_for_the_last_members(self):
        self.race_for_the_last_members([self.claimer()])

    def test_concurrent_launches_share_the_last_members(self):
        self.create_pool(2, 2, max_tasks=5)
        self.manager().run_once()
        members = sorted(m['server_id'] for m in self.idle())
        results = [None] * 4

        def run(i):
            results[i] = self.launch(1)
        threads = [threading.Thread(target=run, args=(i,))
                   for i in range(len(results))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for result in results:
            self.assertEqual('succeeded', result['outcome'], result['error'])
        returned = sorted(sid for r in results
                          for sid in r['cleanup'].get('returned', []))
        self.assertEqual(members, returned)   # each member used once
        self.assertEqual(2, sum(len(r['cleanup']['deleted'])
                                for r in results))
        self.assertEqual(members, sorted(m['server_id'] for m in self.idle()))
        self.assert_only_members_left()

    def test_member_goes_back_unused_when_the_launch_fails_first(self):
        self.create_pool(1, 1)
        self.manager().run_once()
        member = self.idle()[0]['server_id']
        # The fresh VM (named mlaccel-<launch>-1) fails to spawn.
        self.useFixture(pool_base.fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.FAIL_SPAWN',
            _Prefix('mlaccel-')))
        result = self.launch(2)
        self.assertEqual('failed', result['outcome'])
        self.assertEqual([member], result['cleanup']['returned'])
        idle = self.idle()
        self.assertEqual([member], [m['server_id'] for m in idle])
        self.assertEqual(0, idle[0]['tasks'])
        self.assertEqual(0, self.state()['stats']['tasks_served'])
        self.assertIsNone(pool_members.idle_health(idle[0]))

    def test_bus_down_creates_fresh_and_claims_nothing(self):
        self.create_pool(1, 1)
        self.manager().run_once()
        member = self.idle()[0]
        path = self.useFixture(pool_base.fixtures.TempDir()).path
        blocker = path + '/not-a-dir'
        open(blocker, 'w').close()
        self.flags(backend_url='file://' + blocker + '/bus',
                   group='mlaccel_statebus')
        down = pool_store.BusLocks(pool_base.mlaccel_conf.CONF)
        self.addCleanup(down.stop)
        result = self.launch(1, store=pool_store.PoolStore(
            self.store_dir, lock=down, lock_timeout=1.0))
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertNotIn(member['server_id'],
                         [vm['server_id'] for vm in result['vms']])
        self.assertEqual(1, len(result['cleanup']['deleted']))
        self.assertEqual([member], self.idle())   # untouched
        self.assert_only_members_left()

    def test_killed_mid_refill_reconciles_without_orphans(self):
        self.create_pool(1, 1)
        # A member created but never recorded: its manager died in between.
        lost = pool_members.build(self.conn, self.spec,
                                  listener=self.listener, timeout=60,
                                  **pool_base.LAUNCH_OPTIONS)
        self.assertIn(lost['server_id'], self.servers())
        self.manager().run_once()
        state = self.state()
        self.assertNotIn(lost['server_id'], state['members'])
        self.assertEqual(1, len(state['members']))
        self.assertEqual(1, state['stats']['created'])
        self.assert_only_members_left()
        # A second round changes nothing and counts nothing again.
        self.manager().run_once()
        self.assertEqual(state['members'], self.state()['members'])
        self.assertEqual(1, self.state()['stats']['created'])

    def test_a_stop_mid_refill_ends_the_builds_without_orphans(self):
        """Stopping the manager while members build ends its round.

        The members' guests never start (their boot hangs), so each build
        would wait its whole ``build_timeout`` (600 s here); the stop ends
        the waits, each build deletes its VM, nothing is recorded as a
        member or as a failure, and the pool does not back off.
        """
        self.create_pool(2, 2)
        self.hang_members(self.key)
        manager = self.manager()
        worker = threading.Thread(target=manager.run, daemon=True)
        worker.start()
        self.wait_servers(
            lambda found: len(found) == 2 and all(
                s.status == 'ACTIVE' for s in found.values()),
            'both members active, their daemons silent')
        manager.stop()
        # Bound: a tenth of the build timeout the builds would wait.
        worker.join(60.0)
        self.assertFalse(worker.is_alive(), 'the manager did not stop')
        state = self.state()
        self.assertEqual({}, state['members'])
        self.assertEqual(0, state['stats']['create_failures'])
        self.assertEqual(0, state['stats'].get('failed_rounds', 0))
        self.assertGreater(state['stats']['build_vm_s'], 0)
        self.wait_servers(lambda found: not found, 'no server left')

    def test_a_hung_build_holds_up_no_other_pool(self):
        """A pool whose members never get warm delays no other pool.

        Two pools; the members of the one the manager tends first hang
        (ACTIVE, their guests never start: each build would wait its whole
        ``build_timeout``, 600 s). The service's rounds go on: the other
        pool gets its member, the hung builds are counted towards their
        pool (no more are started however many rounds pass) and their
        servers are not deleted as orphans. The stop ends the builds and
        leaves no server.
        """
        other = pool_spec.PoolSpec(
            self.spec.project_id, self.spec.image_id, self.spec.flavor_id,
            preload=['os'])
        hung, served = sorted([self.spec, other], key=lambda s: s.key)
        for spec, size in ((hung, 2), (served, 1)):
            with self.store.transaction(spec.key, create=pool_store.new_state(
                    spec, size, size, 3)):
                pass
        self.assertEqual([hung.key, served.key],
                         [k for k in self.store.keys()
                          if k in (hung.key, served.key)])
        self.hang_members(hung.key)
        manager = self.manager()
        rounds = []
        tend = manager.run_once
        manager.run_once = lambda *args, **kwargs: (
            rounds.append(1), tend(*args, **kwargs))
        worker = threading.Thread(target=manager.run, daemon=True)
        worker.start()
        self.addCleanup(worker.join, 60.0)
        self.addCleanup(manager.stop)
        self._wait_until(
            lambda: pool_store.members(self.store.read(served.key),
                                       pool_store.IDLE),
            'the other pool\'s member warm')
        seen = len(rounds)
        self._wait_until(lambda: len(rounds) >= seen + 5, 'five more rounds')
        self.assertEqual(2, manager.building(hung.key))
        self.assertEqual(2, len([
            s for s in self.servers().values()
            if s.name.startswith(pool_members.name_prefix(hung.key))]))
        self.assertEqual({}, self.store.read(hung.key)['members'])
        manager.stop()
        worker.join(60.0)
        self.assertFalse(worker.is_alive(), 'the manager did not stop')
        self.assertEqual(0, manager.building(hung.key))
        self.assertEqual(0, self.store.read(hung.key)['stats'][
            'create_failures'])
        self.wait_servers(
            lambda found: not [s for s in found.values()
                               if s.name.startswith(
                                   pool_members.name_prefix(hung.key))],
            'no server of the hung pool left')

    def test_builds_no_longer_needed_are_ended(self):
        """A pool whose bounds fall to 0 mid-build ends its builds.

        Its member's guest never starts (the build would wait its whole
        ``build_timeout``, 600 s). Once the pool needs no member, the next
        resize ends the build, which deletes its VM; nothing is counted as
        a failure and the pool does not back off.
        """
        self.create_pool(1, 1)
        self.hang_members(self.key)
        manager = self.manager()
        self.addCleanup(manager.stop)
        self.assertEqual(1, manager.resize(self.key, wait=False))
        self.wait_servers(
            lambda found: [s for s in found.values() if s.status == 'ACTIVE'],
            'the member active, its daemon silent')
        with self.store.transaction(self.key) as state:
            state['bounds'] = {'min': 0, 'max': 0}
        self.assertEqual(0, manager.resize(self.key, wait=False))
        waiter = threading.Thread(target=manager.wait_builds, daemon=True)
        waiter.start()
        # Bound: a tenth of the build timeout the build would wait.
        waiter.join(60.0)
        self.assertFalse(waiter.is_alive(), 'the build was not ended')
        self.assertEqual(0, manager.building(self.key))
        stats = self.state()['stats']
        self.assertEqual(0, stats['create_failures'])
        self.assertEqual(0, stats.get('failed_rounds', 0))
        self.wait_servers(lambda found: not found, 'no server left')

    def test_a_pool_removed_while_its_members_build_leaves_no_server(self):
        """Members built for a pool removed meanwhile are deleted.

        A learned pool is retired, or an operator deletes an empty pool,
        while the manager builds members for it in the background: once
        built, nobody would tend them, so the build deletes them.
        """
        self.create_pool(1, 1)
        manager = self.manager()
        self.assertEqual(1, manager.resize(self.key, wait=False))
        self.assertEqual(1, manager.building(self.key))
        self.store.delete(self.key)
        manager.wait_builds()
        self.assertEqual(0, manager.building(self.key))
        self.assertEqual([], self.store.keys())
        self.wait_servers(lambda found: not found, 'no server left')

    def test_dead_daemon_is_replaced_never_handed_out(self):
        self.create_pool(1, 1)
        manager = self.manager()
        manager.run_once()
        dead = self.idle()[0]['server_id']
        process, _ = guest.GUESTS[dead]
        process.kill()
        process.wait()
        manager.run_once()
        idle = self.idle()
        self.assertEqual(1, len(idle))
        self.assertNotEqual(dead, idle[0]['server_id'])
        self.assertIsNone(pool_members.idle_health(idle[0]))
        self.assert_only_members_left()

    def test_hung_daemon_is_never_handed_out_and_is_replaced(self):
        self.flags(health_timeout=1.0, group='mlaccel_pool')
        self.create_pool(1, 1)
        manager = self.manager()
        manager.run_once()
        hung = self.idle()[0]['server_id']
        process, _ = guest.GUESTS[hung]
        process.send_signal(signal.SIGSTOP)
        self.addCleanup(process.send_signal, signal.SIGCONT)
        # A launch meanwhile: the claim's hand-over times out, the VM is
        # created fresh, the task runs.
        result = self.launch(1)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertNotEqual(hung, result['vms'][0]['server_id'])
        self.assertNotIn(hung, self.state()['members'])
        process.send_signal(signal.SIGCONT)
        self.wait_servers(lambda found: hung not in found,
                          'the hung member deleted')
        # And the manager refills.
        manager.run_once()
        self.assertEqual(1, len(self.idle()))
        self.assert_only_members_left()

    def test_hung_idle_daemon_is_detected_by_the_manager(self):
        self.flags(health_timeout=1.0, group='mlaccel_pool')
        self.create_pool(1, 1)
        manager = self.manager()
        manager.run_once()
        hung = self.idle()[0]['server_id']
        process, _ = guest.GUESTS[hung]
        process.send_signal(signal.SIGSTOP)
        self.addCleanup(process.send_signal, signal.SIGCONT)
        manager.run_once()
        process.send_signal(signal.SIGCONT)
        idle = self.idle()
        self.assertEqual(1, len(idle))
        self.assertNotEqual(hung, idle[0]['server_id'])
        self.assert_only_members_left()

    def test_member_failing_its_first_submit_is_replaced(self):
        self.create_pool(1, 1)
        self.manager().run_once()
        member = self.idle()[0]['server_id']
        claimer = self.claimer()
        claim = claimer.claim

        def claim_then_crash(launch, *ids):
            got = claim(launch, *ids)
            process, _ = guest.GUESTS[member]   # dies after the hand-over
            process.kill()
            process.wait()
            return got
        claimer.claim = claim_then_crash
        result = api.launch(self.conn, base.IMAGE, base.FLAVOR, 1, base.ECHO,
                            {'x': 1}, preload=pool_base.PRELOAD, timeout=60,
                            warm_pool=claimer, **pool_base.LAUNCH_OPTIONS)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        vm = result['vms'][0]
        self.assertNotEqual(member, vm['server_id'])
        self.assertEqual({'x': 1}, vm['result']['args'])
        self.assertEqual([vm['server_id']], result['cleanup']['deleted'])
        self.assertEqual({}, self.state()['members'])
        self.wait_servers(lambda found: not found, 'every server gone')

    def test_members_go_to_their_own_project_only(self):
        self.create_pool(1, 1)
        self.manager().run_once()
        member = self.idle()[0]
        other = pool_base.claims.Claimer(self.store, self.conn,
                                         project_id='other-project')
        launch = api.Launch(self.conn, api.LaunchSpec(
            base.IMAGE, 'ignored', 1, protocol.TaskSpec(base.ECHO)),
            listener=self.listener, preload=pool_base.PRELOAD,
            **pool_base.LAUNCH_OPTIONS)
        # Another project's launches look for another pool.
        self.assertEqual(0, len(other.claim(
            launch, base.IMAGE, self.spec.flavor_id, None)))
        self.assertEqual([member], self.idle())
        # Even a pool state naming that project does not hand it over:
        # Nova says whose server it is.
        with self.store.transaction(self.key) as state:
            state['spec']['project_id'] = 'other-project'
        other_key = pool_base.pool_spec.PoolSpec.from_dict(
            self.state()['spec']).key
        with self.store.transaction(other_key,
                                    create=self.state()):
            pass
        self.assertEqual(0, len(other.claim(
            launch, base.IMAGE, self.spec.flavor_id, None)))
        self.assertIsNone(launch.vms[0].pooled)
        self.assertEqual({}, self.store.read(other_key)['members'])

    def _launch_of_one(self):
        return api.Launch(self.conn, api.LaunchSpec(
            base.IMAGE, 'ignored', 1, protocol.TaskSpec(base.ECHO)),
            listener=self.listener, preload=pool_base.PRELOAD,
            **pool_base.LAUNCH_OPTIONS)

    def _copy_pool(self, project_id):
        """The pool's state, members and all, as a pool of ``project_id``."""
        state = self.state()
        state['spec']['project_id'] = project_id
        key = pool_base.pool_spec.PoolSpec.from_dict(state['spec']).key
        state['key'] = key
        with self.store.transaction(key, create=state):
            pass
        return key

    def test_no_claim_while_the_project_is_unknown(self):
        # Before, an unknown project skipped Nova's check: a launch whose
        # credentials name no project took the members of a pool keyed by
        # no project (as "pool create" made them with such credentials).
        self.create_pool(1, 1)
        self.manager().run_once()
        key = self._copy_pool(None)
        member = self.store.read(key)['members']
        blind = pool_base.claims.Claimer(self.store, self.conn)
        self.assertIsNone(blind.project_id)
        launch = self._launch_of_one()
        self.assertEqual(0, len(blind.claim(
            launch, base.IMAGE, self.spec.flavor_id, None)))
        self.assertIsNone(launch.vms[0].pooled)
        # Nothing lost: the member is still idle, with its token.
        self.assertEqual(member, self.store.read(key)['members'])
        self.assertEqual(set(member), set(self.servers()))

    def test_member_whose_project_nova_does_not_name_stays_idle(self):
        self.create_pool(1, 1)
        self.manager().run_once()
        member = self.idle()[0]
        compute = self.conn.compute

        class Unnamed:
            """Nova's answers, without the server's project."""

            def __getattr__(self, name):
                return getattr(compute, name)

            def get_server(self, server_id):
                server = compute.get_server(server_id)
                server.project_id = None
                return server

        conn = types.SimpleNamespace(compute=Unnamed())
        claimer = pool_base.claims.Claimer(
            self.store, conn, project_id=pool_base.nova_fixtures.PROJECT_ID)
        launch = self._launch_of_one()
        self.assertEqual(0, len(claimer.claim(
            launch, base.IMAGE, self.spec.flavor_id, None)))
        self.assertIsNone(launch.vms[0].pooled)
        # Back in the pool (under the token its daemon now holds), not
        # deleted, and healthy.
        [back] = self.idle()
        self.assertEqual(member['server_id'], back['server_id'])
        self.assertIn(member['server_id'], self.servers())
        self.assertIsNone(pool_members.idle_health(back))
        self.assertEqual(0, self.state()['stats']['claimed'])

    def test_manager_tends_only_its_projects_pools(self):
        # Before, the manager tended every pool of its store, creating
        # members of another project's pool with its own credentials.
        self.create_pool(0, 1)
        other = pool_spec.PoolSpec(
            'other-project', base.IMAGE, self.spec.flavor_id,
            preload=pool_base.PRELOAD)
        with self.store.transaction(other.key, create=pool_store.new_state(
                other, 1, 1, 3)):
            pass
        manager = self.manager()
        manager.run_once()
        self.assertEqual({}, self.store.read(other.key)['members'])
        self.assertEqual({}, self.servers())
        self.assertFalse(manager.tend(other.key))
        # Nor does a manager that cannot tell its project tend its own.
        with self.store.transaction(self.key) as state:
            state['bounds']['min'] = 1
        self.assertIsNone(pool_base.claims.project_of(self.conn))
        self.assertFalse(self.manager(project_id=None).tend(self.key))
        self.assertEqual({}, self.state()['members'])
        self.assertTrue(manager.tend(self.key))
        self.assertEqual(1, len(self.idle()))

    def test_only_the_leader_acts(self):
        self.create_pool(1, 1)
        leader = self.manager(leader_lock=self.locks)
        other_locks = pool_store.BusLocks(pool_base.mlaccel_conf.CONF)
        self.addCleanup(other_locks.stop)
        other = self.manager(leader_lock=other_locks)
        self.assertTrue(leader.is_leader())
        self.assertFalse(other.is_leader())
        thread = threading.Thread(target=other.run)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(other.stop)
        self._wait_until(lambda: other.stop_event.wait(0.5) or True,
                         'a few rounds of the follower')
        self.assertEqual({}, self.state()['members'])
        leader.run_once()
        self.assertEqual(1, len(self.state()['members']))
        leader.resign()
        self._wait_until(other.is_leader, 'the follower to take over')

    def test_no_capacity_pool_shrinks_tasks_run_fresh(self):
        self.create_pool(2, 2)
        self.useFixture(pool_base.fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.FAIL_SPAWN',
            _Prefix(pool_members.name_prefix(self.key))))
        manager = self.manager()
        manager.run_once()
        stats = self.state()['stats']
        self.assertEqual(2, stats['create_failures'])
        self.assertEqual({}, self.state()['members'])
        # The failed attempts' VM-seconds count among the members' costs.
        self.assertGreater(stats['failed_build_vm_s'], 0)
        self.assertEqual(stats['failed_build_vm_s'], stats['build_vm_s'])
        manager.run_once()   # backing off: no new attempt
        self.assertEqual(2, self.state()['stats']['create_failures'])
        result = self.launch(2)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual(2, len(result['cleanup']['deleted']))
        # The refused members were deleted too: nothing is left.
        self.wait_servers(lambda found: not found, 'every server gone')

    def test_failed_builds_back_off_briefly_then_longer(self):
        """A failed build pauses growth shortly; failing again, longer."""
        self.flags(capacity_backoff_first=15.0, capacity_backoff=300.0,
                   group='mlaccel_pool')
        self.create_pool(1, 1)
        failing = _Prefix(pool_members.name_prefix(self.key))
        self.useFixture(pool_base.fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.FAIL_SPAWN', failing))
        manager = self.manager()
        pauses = []
        for _ in range(2):
            before = time.time()
            manager.run_once()
            stats = self.state()['stats']
            pauses.append((stats['capacity_until'] - before,
                           stats['capacity_until'] - time.time()))
            # The pause over: the next round tries again.
            with self.store.transaction(self.key) as state:
                state['stats']['capacity_until'] = time.time() - 1
        self.assertEqual(2, self.state()['stats']['failed_rounds'])
        (first_max, first_min), (second_max, second_min) = pauses
        self.assertTrue(first_min <= 15.0 <= first_max, pauses)
        self.assertTrue(second_min <= 30.0 <= second_max, pauses)
        failing.prefix = "no server is named like this: "
        manager.run_once()
        stats = self.state()['stats']
        self.assertEqual((1, 0, 2), (len(self.state()['members']),
                                     stats['failed_rounds'],
                                     stats['create_failures']))

    def test_over_quota_the_pool_stops_growing_and_serves_what_it_has(self):
        self.flags(instances=2, group='quota')
        self.flags(refill_parallelism=1, group='mlaccel_pool')
        self.create_pool(3, 3)
        manager = self.manager()
        manager.run_once()
        state = self.state()
        self.assertEqual(2, len(state['members']))
        self.assertEqual(1, state['stats']['create_failures'])
        manager.run_once()   # backing off: no new attempt
        self.assertEqual(1, self.state()['stats']['create_failures'])
        result = self.launch(2)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual(sorted(state['members']),
                         result['cleanup']['returned'])
        self.assert_only_members_left()


class EtcdControllersPoolTest(pool_base.PoolTestCase):
    """Pool locks on a real three-member etcd cluster.

    As on several controllers, each controller's clients use its own member.
    """

    def setUp(self):
        super().setUp()
        self.etcd = self.useFixture(mlaccel_fixtures.EtcdCluster())
        self.flags(backend_url=self.etcd.url(0), group='mlaccel_statebus')

    def controller_store(self, member):
        """The pool store as a controller on etcd ``member`` opens it.

        It reaches the shared store through a path of its own, as another
        host mounts it: a process's own locks of one path then exclude
        nothing, and only the lock on etcd keeps two claims apart.
        """
        path = '%s-controller%d' % (self.store_dir, member)
        os.symlink(self.store_dir, path)
        conf = cfg.ConfigOpts()
        mlaccel_conf.register_opts(conf)
        conf([], project='mlaccel', default_config_files=[],
             default_config_dirs=[])
        conf.set_override('backend_url', self.etcd.url(member),
                          'mlaccel_statebus')
        locks = pool_store.BusLocks(conf)
        self.addCleanup(locks.stop)
        return pool_store.PoolStore(path, lock=locks)

    def test_launchers_on_two_controllers_race_for_the_last_members(self):
        self.race_for_the_last_members([
            self.claimer(self.controller_store(member)) for member in (1, 2)])


class _Prefix(set):
    """Names starting with a prefix, for ``guest.FAIL_SPAWN``."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def __contains__(self, name):
        return name.startswith(self.prefix)
