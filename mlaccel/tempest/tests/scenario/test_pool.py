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

"""A task starts on a warm pool member: claimed, not created."""

import importlib.util
import time

from tempest import config
from tempest.lib import decorators

from mlaccel.launcher import api
from mlaccel.pool import claims
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.tempest.tests import base

CONF = config.CONF


class WarmPoolTest(base.MlaccelAdminTest):
    """A launch takes a warm member kept by the cloud's pool manager.

    A member is a VM whose task daemon has the example task's runtime
    imported. A launch claims it, gives its daemon a fresh token over
    pinned TLS and submits the task at once. Needs the pool manager's
    configuration file (its store and state bus) and guests on this host
    (the all-in-one cloud).
    """

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.mlaccel.same_host_as_computes:
            raise cls.skipException('the guests cannot reach this host')
        if not CONF.mlaccel.pool_config_file:
            raise cls.skipException('no pool manager configured')
        if importlib.util.find_spec('torch') is None:
            raise cls.skipException('the example task needs torch')

    def wait_until(self, predicate, what, timeout):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail('timed out after %s s waiting for %s'
                          % (timeout, what))
            time.sleep(0.5)

    def make_pool(self, conf, conn, image_id):
        """A pool of one member for this image, removed after the test.

        The manager deletes the member once the bounds are 0.
        """
        locks = pool_store.BusLocks(conf)
        self.addCleanup(locks.stop)
        store = pool_store.PoolStore(conf.mlaccel_pool.state_dir, lock=locks)
        launcher = conf.mlaccel_launcher
        spec = pool_spec.PoolSpec(
            claims.project_of(conn), image_id, CONF.compute.flavor_ref,
            preload=launcher.preload, network='none',
            taskd_port=launcher.taskd_port)
        with store.transaction(spec.key, create=pool_store.new_state(
                spec, 1, 1, 2)):
            pass

        def remove():
            with store.transaction(spec.key) as state:
                state['bounds'] = {'min': 0, 'max': 0}
            self.wait_until(lambda: not store.read(spec.key)['members'],
                            'the pool to empty',
                            CONF.compute.build_timeout)
            store.delete(spec.key)
        self.addCleanup(remove)
        return store, spec

    @decorators.idempotent_id('6b0f3c1e-9d4a-4c2b-8e7f-1a2b3c4d5e6f')
    def test_launch_claims_a_warm_member_instead_of_creating_a_server(self):
        """Behaviour only; the time to the first step is benchmarked.

        ``python -m mlaccel_lab.bench pool`` measures it, never a test.
        """
        conf = base.mlaccel_config([CONF.mlaccel.pool_config_file])
        conn = self.connect()
        image_id = self.create_image()
        store, spec = self.make_pool(conf, conn, image_id)
        self.wait_until(
            lambda: pool_store.members(store.read(spec.key),
                                       pool_store.IDLE),
            'a warm member', CONF.compute.build_timeout * 3)
        member, = pool_store.members(store.read(spec.key), pool_store.IDLE)
        servers = {s.id for s in conn.compute.servers()}
        result = api.launch(
            conn, image_id, CONF.compute.flavor_ref, 1, 'clip',
            {'steps': 20, 'seed': 1}, network='none',
            timeout=CONF.compute.build_timeout * 3, conf=conf,
            warm_pool=claims.Claimer(
                store, conn, timeout=conf.mlaccel_pool.health_timeout),
            submit_options={'threads': 1, 'seed': 1})
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        vm, = result['vms']
        self.assertEqual(spec.key, vm['pool'])
        self.assertEqual(member['server_id'], vm['server_id'])
        self.assertIsNotNone(vm['observed']['first_step_at'])
        # No server was created for the task: it ran on the member.
        self.assertIn(vm['server_id'], servers)
