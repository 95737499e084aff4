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

"""Pool spec keys and the pool store's transactions."""

import os
import stat
import threading

import fixtures
from oslo_config import cfg
import testtools

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store

from tests import testcase

SPEC = pool_spec.PoolSpec('proj', 'img', 'flv', preload=['json'])


class TestSpec(testcase.TestCase):

    def test_key_names_what_makes_vms_interchangeable(self):
        self.assertEqual(SPEC.key, pool_spec.PoolSpec(
            'proj', 'img', 'flv', preload=('json',)).key)
        for other in (pool_spec.PoolSpec('proj2', 'img', 'flv', ['json']),
                      pool_spec.PoolSpec('proj', 'img2', 'flv', ['json']),
                      pool_spec.PoolSpec('proj', 'img', 'flv2', ['json']),
                      pool_spec.PoolSpec('proj', 'img', 'flv', ['torch']),
                      pool_spec.PoolSpec('proj', 'img', 'flv', ['json'],
                                         server_group_id='g'),
                      pool_spec.PoolSpec('proj', 'img', 'flv', ['json'],
                                         network=[{'uuid': 'n'}]),
                      pool_spec.PoolSpec('proj', 'img', 'flv', ['json'],
                                         boot_volume_gb=2)):
            self.assertNotEqual(SPEC.key, other.key)

    def test_image_backed_key_is_the_one_before_boot_volumes(self):
        # Pools made before specs had boot_volume_gb keep their keys.
        self.assertNotIn('boot_volume_gb', SPEC.to_dict())
        self.assertEqual('9f8ebd00a86ce0ae', SPEC.key)
        self.assertNotEqual(
            pool_spec.PoolSpec('proj', 'img', 'flv', ['json'],
                               boot_volume_gb=1).key,
            pool_spec.PoolSpec('proj', 'img', 'flv', ['json'],
                               boot_volume_gb=2).key)

    def test_round_trip(self):
        spec = pool_spec.PoolSpec('p', 'i', 'f', ['a'], 'g',
                                  [{'uuid': 'n'}], 7071)
        again = pool_spec.PoolSpec.from_dict(spec.to_dict())
        self.assertEqual(spec, again)
        self.assertEqual([{'uuid': 'n'}], again.networks)
        volume = pool_spec.PoolSpec('p', 'i', 'f', boot_volume_gb=3)
        self.assertEqual(volume,
                         pool_spec.PoolSpec.from_dict(volume.to_dict()))

    def test_bad_spec(self):
        self.assertRaises(ValueError, pool_spec.PoolSpec, 'p', '', 'f')
        for size in (0, -1, 1.5, '2', True):
            exc = self.assertRaises(ValueError, pool_spec.PoolSpec, 'p', 'i',
                                    'f', boot_volume_gb=size)
            self.assertIn('boot_volume_gb', str(exc))


class TestStore(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'pools')
        self.store = pool_store.PoolStore(self.dir)

    def _create(self):
        with self.store.transaction(SPEC.key, create=pool_store.new_state(
                SPEC, 0, 3, 2)) as state:
            return state

    def test_private_files_and_round_trip(self):
        self._create()
        self.assertEqual(0o700, stat.S_IMODE(os.stat(self.dir).st_mode))
        path = os.path.join(self.dir, SPEC.key + '.json')
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual([SPEC.key], self.store.keys())
        self.assertEqual(SPEC, pool_store.spec_of(self.store.read(SPEC.key)))

    def test_a_directory_others_can_read_is_refused(self):
        os.makedirs(self.dir, 0o755)
        os.chmod(self.dir, 0o755)
        self.assertRaises(PermissionError, self._create)

    def test_failed_transaction_writes_nothing(self):
        self._create()
        with testtools.ExpectedException(RuntimeError):
            with self.store.transaction(SPEC.key) as state:
                state['bounds']['max'] = 99
                raise RuntimeError('boom')
        self.assertEqual(3, self.store.read(SPEC.key)['bounds']['max'])

    def test_missing_pool(self):
        self.assertRaises(pool_store.NoSuchPool, self.store.read, 'abc')
        with testtools.ExpectedException(pool_store.NoSuchPool):
            with self.store.transaction('abc'):
                pass

    def test_bounds_checked(self):
        for args in ((2, 1, 1), (-1, 1, 1), (0, 1, 0), (0, True, 1)):
            self.assertRaises(ValueError, pool_store.new_state, SPEC, *args)

    def test_threads_see_one_order(self):
        self._create()

        def bump():
            for _ in range(20):
                with self.store.transaction(SPEC.key) as state:
                    state['stats']['claimed'] += 1
        threads = [threading.Thread(target=bump) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(80, self.store.read(SPEC.key)['stats']['claimed'])

    def test_bus_lock_that_fails_makes_pool_unavailable(self):
        self._create()

        def broken(name):
            raise OSError('bus down')
        store = pool_store.PoolStore(self.dir, lock=broken)
        with testtools.ExpectedException(pool_store.PoolUnavailable):
            with store.transaction(SPEC.key):
                pass

    def test_a_bus_that_does_not_answer_is_given_up_on(self):
        """Within lock_timeout, whatever the bus client does meanwhile."""
        self._create()
        answer = threading.Event()
        released = threading.Event()

        class SlowLock:
            def acquire(self, blocking):
                answer.wait(60)
                return True

            def release(self):
                released.set()

        def connecting(name):
            answer.wait(60)     # a client retrying its connection
            return SlowLock()
        store = pool_store.PoolStore(self.dir, lock=connecting,
                                     lock_timeout=0.05)
        with testtools.ExpectedException(pool_store.PoolUnavailable,
                                         '.*did not answer'):
            with store.transaction(SPEC.key) as state:
                state['stats']['claimed'] += 1
        self.assertEqual(0, self.store.read(SPEC.key)['stats']['claimed'])
        # Other threads of the process are not held up meanwhile.
        with self.store.transaction(SPEC.key) as state:
            state['stats']['claimed'] += 1
        # The bus answers late: the lock it gave is released, not kept.
        self.assertFalse(released.is_set())
        answer.set()
        self.assertTrue(released.wait(30))

    def test_stopping_the_locks_does_not_wait_for_a_connecting_client(self):
        """The bus client is a stand-in that connects until told to.

        (A real client's connection attempt to a dead bus lasts about a
        minute; this one ends when the test says so.)
        """
        answer = threading.Event()
        connecting = threading.Event()
        stopped = []

        class Client:
            def start(self, start_heart):
                connecting.set()
                answer.wait(60)

            def stop(self):
                stopped.append(self)

        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.statebus.coordinator',
            lambda conf, member, **kw: Client()))
        conf = cfg.ConfigOpts()
        mlaccel_conf.register_opts(conf)
        conf([], project='mlaccel')
        locks = pool_store.BusLocks(conf)
        raised = []

        def ask():
            try:
                locks('mlaccel-pool-x')
            except pool_store.PoolUnavailable as exc:
                raised.append(exc)
        asking = threading.Thread(target=ask)
        asking.start()
        self.assertTrue(connecting.wait(30))
        locks.stop()            # returns while the client still connects
        self.assertTrue(asking.is_alive())
        answer.set()
        asking.join(30)
        # The client that connected after the stop is stopped, not kept.
        self.assertEqual(1, len(raised))
        self.assertEqual(1, len(stopped))

    def test_end_idle_counts_once(self):
        state = pool_store.new_state(SPEC, 0, 3, 2)
        member = {'idle_since': 100.0}
        pool_store.end_idle(state, member, 130.0)
        pool_store.end_idle(state, member, 160.0)
        self.assertEqual(30.0, state['stats']['idle_vm_s'])
