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

"""The pool managers' leader lock on real backends: file, Redis and etcd.

Real parts: a tooz client of each backend (a real ``redis-server``, a real
three-member etcd cluster), pool managers' own leadership code, and a
manager that dies for real (a separate process, SIGKILLed).
"""

import os
import select
import subprocess
import sys
import time

import fixtures
from tooz import coordination

from mlaccel.pool import manager as pool_manager
from mlaccel.pool import store as pool_store
from mlaccel import statebus
from tests import fixtures as mlaccel_fixtures
from tests import testcase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: Seconds a leader lock's lease lives without its holder's heartbeat.
LEASE = 3


class LeadershipTests:
    """Two managers, one leader; a dead leader's lock passes on."""

    BACKEND = None

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(
            self.conf.conf, self.BACKEND))
        self.url = self.bus.url
        self.conf.set('mlaccel_pool', leader_lease=LEASE)

    def manager(self):
        locks = pool_store.BusLocks(self.conf.conf)
        self.addCleanup(locks.stop)
        manager = pool_manager.PoolManager(None, None, self.conf.conf,
                                           leader_lock=locks)
        self.addCleanup(manager.resign)
        return manager

    def test_one_leader_at_a_time_and_it_stays_leader(self):
        first, second = self.manager(), self.manager()
        self.assertTrue(first.is_leader())
        for _ in range(3):   # rounds after the first
            self.assertTrue(first.is_leader())
            self.assertFalse(second.is_leader())
        first.resign()
        self.assertTrue(second.is_leader())
        self.assertFalse(first.is_leader())

    def test_a_killed_leader_s_lock_passes_to_the_other(self):
        """Bound: the lock's lease and a few rounds after it.

        The lease is ``[mlaccel_pool] leader_lease``, here ``LEASE`` s.

        A manager process takes the lead and is SIGKILLed; the one left
        leads once the dead one's lock has expired, and not before the
        kill.
        """
        env = dict(os.environ, PYTHONWARNINGS='ignore', PYTHONPATH=(
            os.pathsep.join(filter(None, [ROOT,
                                          os.environ.get('PYTHONPATH')]))))
        proc = subprocess.Popen(
            [sys.executable, '-m', 'tests.unit.pool.leader_process',
             self.url, str(LEASE)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ''
        if line.strip() != 'leading':
            proc.kill()
            self.fail('the first manager did not lead: %r %s'
                      % (line, proc.stderr.read()))
        survivor = self.manager()
        self.assertFalse(survivor.is_leader())
        proc.kill()
        proc.wait()
        killed = time.monotonic()
        bound = self.takeover_bound()
        while not survivor.is_leader():
            self.assertLess(time.monotonic() - killed, bound,
                            'no manager led within %.0f s of the leader\'s '
                            'death' % bound)
            time.sleep(0.2)

    def takeover_bound(self):
        return LEASE + 10.0


class TestFileLeadership(LeadershipTests, testcase.TestCase):
    """The file backend's lock dies with its holder's process."""

    BACKEND = 'file'


class TestRedisLeadership(LeadershipTests, testcase.TestCase):
    BACKEND = 'redis'


class TestEtcdLeadership(LeadershipTests, testcase.TestCase):
    """tooz's etcd3gw lock, whose holder cannot tell it lost the lock.

    :func:`mlaccel.statebus.still_owner` reads the lock's key instead.
    """

    BACKEND = 'etcd'

    def test_a_holder_cut_off_past_its_lease_knows_it_leads_no_more(self):
        """A holder silent past its lease learns that another took over.

        It stopped heartbeating, as one cut off from etcd does.
        """
        holders = []
        url = self.url + '&lock_timeout=%d' % LEASE
        for name in (b'a', b'b'):
            coord = coordination.get_coordinator(url, name)
            coord.start(start_heart=False)
            self.addCleanup(coord.stop)
            holders.append(coord.get_lock(b'mlaccel-test-lock'))
        first, second = holders
        self.assertTrue(first.acquire(blocking=False))
        self.assertTrue(statebus.still_owner(first))
        self.assertFalse(second.acquire(blocking=False))
        deadline = time.monotonic() + LEASE + 10.0
        while not second.acquire(blocking=False):
            self.assertLess(time.monotonic(), deadline,
                            'the expired lease never freed the lock')
            time.sleep(0.2)
        # tooz itself still says the first holds it...
        self.assertTrue(first.acquired)
        self.assertTrue(first.heartbeat())
        # ...the key says otherwise.
        self.assertFalse(statebus.still_owner(first))
        self.assertTrue(statebus.still_owner(second))

    def test_after_the_quorum_s_loss_and_return_a_manager_leads(self):
        """Bound: the lease and a few rounds after the quorum returned.

        The leader fails to check its lock while etcd has no quorum; the
        lock it still holds (its client keeps the lease alive) must not
        keep every manager from leading once etcd answers again.
        """
        cluster = self.bus.server
        # Through member 0, as the bus's URL; a request gives up in 2 s.
        self.conf.set('mlaccel_statebus', backend_url=self.url + '&timeout=2')
        first, second = self.manager(), self.manager()
        self.assertTrue(first.is_leader())
        others = [1, 2]
        for member in others:
            cluster.kill(member)
        self.assertFalse(first.is_leader())   # it cannot tell: it waits
        for member in others:
            cluster.start(member)
        back = time.monotonic()
        bound = self.takeover_bound()
        while not (first.is_leader() or second.is_leader()):
            self.assertLess(time.monotonic() - back, bound,
                            'no manager led within %.0f s of the quorum\'s '
                            'return' % bound)
            time.sleep(0.2)
        self.assertNotEqual(first.is_leader(), second.is_leader())
