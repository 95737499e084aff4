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

"""Learned pools on Nova's in-process services: made, used and retired.

Real parts as in :mod:`tests.functional.pool.base`. Glance is not part of
Nova's harness: whether the project can boot an image is asked of Nova's
own Glance fixture, the image service the harness's servers boot from.

Nova's fake hypervisor makes a server's guest ready in under a second, less
than a claim is counted to cost (:data:`mlaccel.pool.learning.CLAIM_SECONDS`):
no member would save anything, and rightly no pool would be learned. The
guests here take :data:`SPAWN_SECONDS` more to spawn, as any real one does.
"""

import time

import fixtures

from mlaccel.pool import demand
from mlaccel.pool import learning
from mlaccel.pool import members as pool_members
from mlaccel.pool import store as pool_store
from tests.functional.launcher import guest
from tests.functional.pool import base as pool_base

PROJECT = pool_base.nova_fixtures.PROJECT_ID
#: Seconds a guest's spawn takes on top of the fake hypervisor's.
SPAWN_SECONDS = 2.0


class SlowSpawnDriver(guest.TaskdGuestDriver):
    """The launcher tests' driver, its spawn slower by ``SPAWN_SECONDS``."""

    def spawn(self, *args, **kwargs):
        time.sleep(SPAWN_SECONDS)
        return super().spawn(*args, **kwargs)


class LearnedPoolTest(pool_base.PoolTestCase):

    def setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.TaskdGuestDriver',
            SlowSpawnDriver))
        super().setUp()
        self.flags(learn=True, learn_projects=[PROJECT], budget_members=2,
                   budget_idle_vm_hours=48.0, group='mlaccel_pool')
        self.log = demand.DemandLog(self.store)

    def manager(self, **kwargs):
        kwargs.setdefault('image_visible', lambda image_id:
                          image_id in self.glance.images)
        return super().manager(**kwargs)

    def age_the_demand(self, seconds):
        """Move every recorded ask ``seconds`` back, as time passing would."""
        with self.store.transaction(demand.document_key(PROJECT),
                                    suffix=demand.SUFFIX) as doc:
            for ask in doc['asks']:
                ask[0] -= seconds

    def test_a_launch_stream_with_no_pool_ends_served_by_a_learned_one(self):
        first = self.launch(1)
        self.assertEqual('succeeded', first['outcome'], first['error'])
        self.assertEqual([], self.store.keys())

        manager = self.manager()
        manager.run_once()
        state = self.state()
        self.assertTrue(learning.is_learned(state))
        self.assertEqual(1, state['learned_target'])
        self.assertEqual(1, len(self.idle()))

        second = self.launch(1)
        self.assertEqual('succeeded', second['outcome'], second['error'])
        [vm] = second['vms']
        self.assertEqual(self.key, vm['pool'])
        doc = self.log.read(PROJECT)
        self.assertEqual([[self.key, 1, 0], [self.key, 1, 1]],
                         [ask[1:] for ask in doc['asks']])

        # Demand stops: a day and two hours later (a whole day recorded,
        # so the record so far no longer stands for the usual day),
        # nothing recent, nothing at this time yesterday. The member goes,
        # then the pool.
        self.age_the_demand(26 * 3600.0)
        manager.run_once()
        self._wait_until(lambda: not self.store.exists(self.key) or
                         not self.state()['members'], 'the member to go')
        # Retired once Nova lists none of its servers.
        self._wait_until(lambda: (manager.run_once(), self.store.keys())[1]
                         == [], 'the pool to be retired')
        self.wait_servers(lambda found: not found, 'every server gone')

    def test_retired_only_once_nova_lists_none_of_its_servers(self):
        """A server under a retiring pool's name is deleted, not left.

        The pool's member is gone, but a server under its name that the
        store never held is still in Nova (a member whose manager died
        between creating and recording it). Retiring the pool would leave
        that server to nobody: the pool stays until its rounds deleted it.
        """
        self.launch(1)
        manager = self.manager()
        manager.run_once()
        self.assertEqual(1, len(self.idle()))
        self.age_the_demand(26 * 3600.0)
        manager.run_once()
        self.assertEqual({}, self.state()['members'])
        lost = pool_members.build(self.conn, self.spec,
                                  listener=self.listener, timeout=60,
                                  **pool_base.LAUNCH_OPTIONS)
        self.assertIn(lost['server_id'], self.servers())

        def retired():
            manager.run_once()
            return not self.store.exists(self.key)

        self._wait_until(retired, 'the pool to be retired')
        self.wait_servers(lambda found: not found, 'every server gone')

    def test_the_budget_is_never_exceeded(self):
        self.flags(budget_members=0, group='mlaccel_pool')
        self.launch(1)
        self.manager().run_once()
        self.assertEqual([], self.store.keys())
        self.assertEqual({}, self.manager().learner().plan().members)

    def test_the_day_s_idle_hours_are_never_exceeded(self):
        """A day already spent makes no member; the spend is recorded."""
        self.launch(1)
        now = time.time()
        # Four members held the last 12 hours, and still: the 48 VM-hours
        # are spent, and none of them leaves the day before a member made
        # now could be retired.
        with self.store.transaction(demand.document_key(PROJECT),
                                    suffix=demand.SUFFIX) as doc:
            doc['spend'] = [[now - demand.DAY, 0],
                            [now - demand.DAY / 2, 4]]
        manager = self.manager()
        manager.run_once()
        self.assertEqual([], self.store.keys())
        # A day later the room is back: the pool is made, and what it
        # holds is recorded as the day's spend from then on.
        with self.store.transaction(demand.document_key(PROJECT),
                                    suffix=demand.SUFFIX) as doc:
            doc['spend'] = [[now - 2 * demand.DAY, 2],
                            [now - demand.DAY - 60.0, 0]]
        manager.run_once()
        self.assertEqual(1, len(self.idle()))
        doc = self.log.read(PROJECT)
        self.assertEqual(1, demand.holding(doc))
        self.assertLess(demand.spent(doc, time.time()), 48 * 3600.0)

    def test_allow_lists_and_image_visibility(self):
        self.launch(1)
        for flags in ({'learn_images': ['another-image']},
                      {'learn_flavors': ['another-flavor']},
                      {'learn_projects': ['another-project']}):
            self.flags(group='mlaccel_pool', **flags)
            self.manager().run_once()
            self.assertEqual([], self.store.keys(), flags)
            self.flags(learn_images=[], learn_flavors=[],
                       learn_projects=[PROJECT], group='mlaccel_pool')
        self.manager(image_visible=lambda image_id: False).run_once()
        self.assertEqual([], self.store.keys())

    def test_an_operator_pool_is_left_alone_and_served_first(self):
        self.create_pool(2, 2)
        manager = self.manager()
        manager.run_once()
        self.assertEqual(2, len(self.idle()))
        self.launch(1)
        manager.run_once()
        state = self.state()
        self.assertFalse(learning.is_learned(state))
        self.assertNotIn('learned_target', state)
        # Its two idle members take the whole budget of two.
        self.assertEqual([self.key], self.store.keys())
        self.assertEqual({}, manager.learner().last.members)
        self.assertEqual(pool_store.IDLE, self.idle()[0]['state'])
