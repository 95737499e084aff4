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

"""Warm pools on Nova's in-process services, with task daemon guests.

Real parts: everything of :mod:`tests.functional.launcher.base` (Nova's
API, conductor, scheduler, placement and compute; one real
``mlaccel-taskd`` process per server), the pool store in a private
directory, and tooz locks on a file state bus.
"""

import os
import threading

import fixtures
from nova.tests import fixtures as nova_fixtures

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.launcher import ready_listener
from mlaccel.pool import claims
from mlaccel.pool import demand
from mlaccel.pool import manager as pool_manager
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.taskd import client
from mlaccel.taskd import protocol
from tests.functional.launcher import base
from tests.functional.launcher import guest

PRELOAD = ['json']
LAUNCH_OPTIONS = {'listen_host': '127.0.0.1', 'poll_interval': 0.5,
                  'delete_timeout': 60}


class PoolTestCase(base.LauncherTestCase):
    """A pool store, bus locks, a manager and helpers to launch with them."""

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.flags(backend_url='file://' + os.path.join(tmp, 'bus'),
                   group='mlaccel_statebus')
        self.flags(interval=0.2, health_timeout=5.0, health_failures=1,
                   build_timeout=60.0, default_lead_time=10.0, margin=0.0,
                   arrival_window=600.0, group='mlaccel_pool')
        self.locks = pool_store.BusLocks(mlaccel_conf.CONF)
        self.addCleanup(self.locks.stop)
        self.store_dir = os.path.join(tmp, 'pools')
        self.store = pool_store.PoolStore(self.store_dir, lock=self.locks)
        self.listener = ready_listener.ReadinessListener('127.0.0.1')
        self.listener.start()
        self.addCleanup(self.listener.stop)
        flavor = self.conn.compute.find_flavor(base.FLAVOR,
                                               ignore_missing=False)
        self.spec = pool_spec.PoolSpec(
            nova_fixtures.PROJECT_ID, base.IMAGE, flavor.id,
            preload=PRELOAD)
        self.key = self.spec.key

    def create_pool(self, min_size, max_size, max_tasks=3):
        with self.store.transaction(self.key, create=pool_store.new_state(
                self.spec, min_size, max_size, max_tasks)):
            pass

    def manager(self, leader_lock=None, **kwargs):
        # The harness's credentials name no project: the manager is told.
        kwargs.setdefault('project_id', nova_fixtures.PROJECT_ID)
        return pool_manager.PoolManager(
            self.conn, self.store, mlaccel_conf.CONF,
            leader_lock=leader_lock, listener=self.listener,
            **dict(LAUNCH_OPTIONS, **kwargs))

    def claimer(self, store=None):
        store = store or self.store
        return claims.Claimer(
            store, self.conn, project_id=nova_fixtures.PROJECT_ID,
            timeout=mlaccel_conf.CONF.mlaccel_pool.health_timeout,
            demand=demand.DemandLog(store))

    def launch(self, count, store=None, **kwargs):
        kwargs.setdefault('timeout', 60)
        return api.launch(self.conn, base.IMAGE, base.FLAVOR, count,
                          base.ECHO, {'x': 1}, preload=PRELOAD,
                          warm_pool=self.claimer(store),
                          **dict(LAUNCH_OPTIONS, **kwargs))

    def race_for_the_last_members(self, claimers):
        """Eight launches of two VMs claim three members at once.

        Launch ``i`` claims through ``claimers[i % len(claimers)]``.
        """
        self.create_pool(3, 3)
        self.manager().run_once()
        members = {m['server_id'] for m in self.idle()}
        self.assertEqual(3, len(members))
        launches = [api.Launch(self.conn, api.LaunchSpec(
            base.IMAGE, 'ignored', 2, protocol.TaskSpec(base.ECHO)),
            listener=self.listener, preload=PRELOAD,
            **LAUNCH_OPTIONS) for _ in range(8)]
        flavor = self.spec.flavor_id
        gate = threading.Barrier(len(launches))

        def claim(i, launch):
            claimer = claimers[i % len(claimers)]
            gate.wait()
            launch.adopt(claimer.claim(launch, base.IMAGE, flavor, None))
        threads = [threading.Thread(target=claim, args=(i, launch))
                   for i, launch in enumerate(launches)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        got = [vm.server_id for launch in launches for vm in launch.vms
               if vm.pooled]
        # Each member went to exactly one launch.
        self.assertEqual(sorted(members), sorted(got))
        self.assertEqual([], self.idle())
        # Each holder reaches its members with its own token only.
        for launch in launches:
            for vm in launch.vms:
                if vm.pooled:
                    with client.TaskdClient(
                            vm.ready.address, token=vm.token,
                            pinned_cert_pem=vm.identity.cert_pem) as conn:
                        self.assertEqual('ready', conn.health()['state'])
        self.assertEqual(16, self.state()['stats']['asked'])

    def state(self):
        return self.store.read(self.key)

    def idle(self):
        return pool_store.members(self.state(), pool_store.IDLE)

    def servers(self):
        return {s.id: s for s in self.conn.compute.servers()
                if s.status not in ('DELETED', 'SOFT_DELETED')}

    def wait_servers(self, predicate, what):
        self._wait_until(lambda: predicate(self.servers()), what)

    def assert_only_members_left(self):
        members = set(self.state()['members'])
        self.wait_servers(lambda found: set(found) == members,
                          'only the pool members to be left')
        self._wait_until(lambda: set(guest.GUESTS) == members,
                         'only the members\' daemons to run')
