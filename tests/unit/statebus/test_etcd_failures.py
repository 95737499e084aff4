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

"""The state bus while a real three-member etcd cluster loses members.

Real parts: the etcd members (SIGKILLed and restarted), tooz's etcd3gw
client, the publisher and the reader's cache. The bus is reached through
one member, as a controller's services reach their local member. Each test
names its bound: ``TIMEOUT``, the client's request timeout, beyond which a
reader that gets no answer counts the bus as unreadable.
"""

import time

from tests import testcase
from tests.unit.statebus import test_statebus

#: Seconds an etcd request may take before the client gives up.
TIMEOUT = 2
#: Seconds for a cluster that lost its leader to elect another.
ELECTION = 10.0

report = test_statebus.report


class EtcdFailureTest(test_statebus.BusTestBase, testcase.TestCase):

    BACKEND = 'etcd'

    def setUp(self):
        super().setUp()
        self.cluster = self.bus.server

    def through(self, member):
        """Use the bus through ``member`` (its client port)."""
        self.conf.set('mlaccel_statebus', backend_url=(
            self.cluster.url(member) + '&timeout=%d&executor=synchronous'
            % TIMEOUT))

    def publish_and_read(self, pub, cache, n):
        r = report('cmp1', builds_in_flight=n)
        pub.publish(r)
        cache.refresh()
        return r, cache.snapshot().get('cmp1')

    def followers(self):
        """The leader, then the two followers."""
        leader = self.cluster.leader()
        return [leader] + [m for m in range(self.cluster.size)
                           if m != leader]

    def test_a_follower_lost_and_back_reports_keep_flowing(self):
        _leader, ours, other = self.followers()
        self.through(ours)
        pub = self.bus.publisher('cmp1')
        cache = self.bus.cache()
        self.assertEqual(*self.publish_and_read(pub, cache, 1))
        self.cluster.kill(other)
        self.assertEqual(*self.publish_and_read(pub, cache, 2))
        self.assertTrue(cache.healthy)
        self.cluster.start(other)
        self.assertEqual(*self.publish_and_read(pub, cache, 3))

    def test_the_leader_lost_reports_flow_after_an_election(self):
        leader, follower, _other = self.followers()
        self.through(follower)
        pub = self.bus.publisher('cmp1')
        cache = self.bus.cache()
        self.assertEqual(*self.publish_and_read(pub, cache, 1))
        self.cluster.kill(leader)
        deadline = time.monotonic() + ELECTION
        while True:
            try:
                sent, got = self.publish_and_read(pub, cache, 2)
                if sent == got:
                    break
            except Exception:
                pass   # no leader yet: the write fails, as any client's
            self.assertLess(time.monotonic(), deadline,
                            'no report flowed within %.0f s of the '
                            'leader\'s loss' % ELECTION)
            time.sleep(0.2)
        self.assertTrue(cache.healthy)
        self.assertNotEqual(leader, self.cluster.leader())

    def test_quorum_lost_readers_fall_back_then_recover(self):
        """Two of three members down: stock behaviour, then recovery.

        A refresh gives up on the bus (the client's timeout), so the reader
        gives the scheduler no reports; they are back once a member
        returns. How long the refresh takes is a benchmark's to measure.
        """
        self.through(0)
        pub = self.bus.publisher('cmp1')
        cache = self.bus.cache()
        self.assertEqual(*self.publish_and_read(pub, cache, 1))
        self.cluster.kill(1)
        self.cluster.kill(2)
        cache.refresh()   # gives up after the client's timeout
        self.assertIs(False, cache.healthy)
        self.assertIsNone(cache.snapshot().get('cmp1'))
        self.assertIn('unreadable, scheduling without host reports',
                      self.log.output)
        self.cluster.start(1)
        deadline = time.monotonic() + ELECTION + 3 * TIMEOUT
        while not cache.healthy:
            self.assertLess(time.monotonic(), deadline,
                            'the bus did not come back with its quorum')
            cache.refresh()
        again = report('cmp1', builds_in_flight=5)
        pub.publish(again)
        cache.refresh()
        self.assertEqual(again, cache.snapshot().get('cmp1'))
