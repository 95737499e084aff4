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

Needs a running cloud (``python -m mlaccel.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise. Real parts: Nova, Glance and the
state bus of the cloud, ``mlaccel-pool-manager`` running as a service of
it, members' task daemons as guest processes of the test virt driver.
Every test makes an image of its own, so its pool is its own.
"""

import concurrent.futures
import os
import time
import uuid

from oslo_config import cfg
import testtools

from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.pool import claims
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import members as pool_members
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.testing.aio import fixture
from mlaccel.testing.aio import pools
from mlaccel.testing.aio import procs

WAIT = 300


class PoolOnCloudTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.aio = self.useFixture(fixture.RunningCloud())
        self.lay = self.aio.layout
        if not procs.running(self.lay, pools.SERVICE):
            self.fail('the cloud runs no pool manager')
        self.conn = self.aio.connect()
        self.conf = cfg.ConfigOpts()
        mlaccel_conf.register_opts(self.conf)
        self.conf([], project='mlaccel',
                  default_config_files=[pools.config_file(self.lay)])
        self.store = pool_cli.open_store(self.conf)
        self.addCleanup(self.store.lock.stop)

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

    def make_pool(self, size, max_tasks=2):
        """A pool of ``size`` members for a new image; emptied after."""
        image = self.conn.image.create_image(
            name='mlaccel-pool-test-%s' % uuid.uuid4().hex[:8],
            data=os.urandom(1 << 20), disk_format='raw',
            container_format='bare')
        self.addCleanup(self.conn.image.delete_image, image,
                        ignore_missing=True)
        launcher = self.conf.mlaccel_launcher
        spec = pool_spec.PoolSpec(
            claims.project_of(self.conn), image.id,
            self.aio.cloud['flavor_id'], preload=launcher.preload,
            network='none', taskd_port=launcher.taskd_port)
        with self.store.transaction(spec.key, create=pool_store.new_state(
                spec, size, size, max_tasks)):
            pass
        self.addCleanup(self.remove_pool, spec.key)
        return spec

    def remove_pool(self, key):
        with self.store.transaction(key) as state:
            state['bounds'] = {'min': 0, 'max': 0}
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

    def launch(self, spec):
        return api.launch(
            self.conn, spec.image_id, spec.flavor_id, 1, 'clip',
            {'steps': 2, 'seed': 1}, network='none', timeout=WAIT,
            conf=self.conf, submit_options={'threads': 1, 'seed': 1},
            warm_pool=claims.Claimer(
                self.store, self.conn,
                timeout=self.conf.mlaccel_pool.health_timeout))

    def test_refill_claim_and_return(self):
        spec = self.make_pool(2)
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        members = set(self.idle(spec.key))
        result = self.launch(spec)
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
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

    def restart_manager(self):
        if not procs.running(self.lay, pools.SERVICE):
            pools.start_manager(self.lay)
