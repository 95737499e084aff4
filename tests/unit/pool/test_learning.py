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

"""The learned pools' policy on demand documents: what it pools, and how
many members, under the operator's options."""

import os
import threading
from unittest import mock

import fixtures

from mlaccel.pool import demand
from mlaccel.pool import learning
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from tests import fixtures as mlaccel_fixtures
from tests import testcase

PROJECT = 'proj'
HOT = pool_spec.PoolSpec(PROJECT, 'img-hot', 'flv')
WARM = pool_spec.PoolSpec(PROJECT, 'img-warm', 'flv')
HIDDEN = pool_spec.PoolSpec(PROJECT, 'img-hidden', 'flv')
NOW = 100000.0


def configured(test, **overrides):
    """``test``'s own ``ConfigOpts``, learning ``PROJECT``'s pools."""
    conf = test.useFixture(mlaccel_fixtures.Conf())
    values = dict(learn=True, learn_projects=[PROJECT], budget_members=4,
                  budget_idle_vm_hours=96.0)
    values.update(overrides)
    conf.set('mlaccel_pool', **values)
    return conf.conf


def record(doc, spec, times, fresh=120.0):
    """Missed asks of one VM of ``spec``, ``times`` seconds before NOW.

    Each measures ``fresh`` seconds of fresh overhead (None: none measured).
    """
    for ago in times:
        demand.add_ask(doc, spec, 1, 0, NOW - ago)
        if fresh is not None:
            demand.add_fresh(doc, spec.key, [fresh])


class PolicyTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.doc = demand.empty(PROJECT)
        # HOT asked for every 30 s over the last ten minutes, WARM twice.
        record(self.doc, HOT, range(0, 600, 30))
        record(self.doc, WARM, (100.0, 400.0))
        self.seen = []

    def policy(self, **overrides):
        def visible(image_id):
            self.seen.append(image_id)
            return image_id != HIDDEN.image_id
        return learning.Policy(configured(self, **overrides).mlaccel_pool,
                               PROJECT, visible)

    def test_keys_with_demand_get_members_by_value(self):
        granted, targets = self.policy().targets(self.doc, NOW, {})
        self.assertGreater(granted.members[HOT.key],
                           granted.members.get(WARM.key, 0))
        self.assertEqual(granted.members, {k: v for k, v in targets.items()
                                           if v})
        self.assertLessEqual(granted.total, 4)

    def test_no_saving_measured_no_pool(self):
        doc = demand.empty(PROJECT)
        record(doc, HOT, range(0, 600, 30), fresh=None)
        self.assertEqual({}, self.policy().targets(doc, NOW, {})[1])

    def test_no_pool_where_a_fresh_vm_is_as_quick_as_a_claim(self):
        doc = demand.empty(PROJECT)
        record(doc, HOT, range(0, 600, 30),
               fresh=learning.CLAIM_SECONDS * 0.9)
        granted, targets = self.policy().targets(doc, NOW, {})
        self.assertEqual(({}, {}), (granted.members, targets))
        self.assertEqual([HOT.key], list(granted.refused))

    def test_the_operator_s_policy_decides_what_may_be_learned(self):
        for overrides in ({'learn': False}, {'learn_projects': ['other']},
                          {'learn_images': ['img-other']},
                          {'learn_flavors': ['flv-other']}):
            self.assertEqual([], self.policy(**overrides).candidates(
                self.doc, NOW), overrides)
        only_warm = self.policy(learn_images=[WARM.image_id])
        self.assertEqual([WARM.key], [c.key for c in only_warm.candidates(
            self.doc, NOW)])

    def test_an_image_the_project_cannot_boot_is_never_pooled(self):
        record(self.doc, HIDDEN, range(0, 600, 10))
        policy = self.policy()
        with self.assertLogs(learning.LOG.logger, 'WARNING') as logs:
            for _ in range(3):
                self.assertNotIn(HIDDEN.key,
                                 policy.targets(self.doc, NOW, {})[1])
        self.assertEqual(1, len(logs.records))   # said once, not each round

    def test_a_member_alive_gives_its_place_to_one_worth_more(self):
        """No claim to a place: WARM's member goes when HOT's is worth more.

        One member allowed, WARM's warm: HOT is asked for far more, so
        WARM's member is retired now and HOT's made once it is gone.
        """
        policy = self.policy(budget_members=1, budget_idle_vm_hours=24.0)
        granted, targets = policy.targets(self.doc, NOW, {WARM.key: 1})
        self.assertEqual({HOT.key: 1}, granted.members)
        self.assertEqual({WARM.key: 0, HOT.key: 0}, targets)
        _granted, targets = policy.targets(self.doc, NOW + 60.0, {})
        self.assertEqual({HOT.key: 1}, targets)

    def test_operator_pools_are_left_alone_and_count_first(self):
        policy = self.policy()
        granted, targets = policy.targets(self.doc, NOW, {},
                                          manual={HOT.key}, reserved=3)
        self.assertNotIn(HOT.key, targets)
        self.assertLessEqual(granted.total, 1)
        _granted, targets = policy.targets(self.doc, NOW, {},
                                           manual={HOT.key}, reserved=4)
        self.assertEqual({}, targets)

    def test_members_alive_beyond_the_budget_are_not_added_to(self):
        # A budget lowered to 1 while 3 of WARM's members are alive: none
        # is made for HOT until they are gone.
        _granted, targets = self.policy(budget_members=1).targets(
            self.doc, NOW, {WARM.key: 3})
        self.assertEqual(0, targets.get(HOT.key, 0))
        self.assertLessEqual(targets[WARM.key], 1)

    def test_a_measured_lead_time_is_used_else_the_default(self):
        policy = self.policy(default_lead_time=30.0)
        by_default = {c.key: c.forecast for c in policy.candidates(
            self.doc, NOW)}
        measured = {c.key: c.forecast for c in policy.candidates(
            self.doc, NOW, leads={HOT.key: 300.0, WARM.key: None})}
        # Ten asks in any 300 s of HOT's stream, one in any 30 s.
        self.assertEqual(1, by_default[HOT.key].target)
        self.assertEqual(10, measured[HOT.key].target)
        self.assertEqual(by_default[WARM.key], measured[WARM.key])


class DailyBudgetTest(testcase.TestCase):
    """The idle VM-hours a day: spent in the busy hours, never passed."""

    def setUp(self):
        super().setUp()
        # Three days: HOT asked for every 20 s from 18:00 to 20:00, and
        # WARM once an hour all day; now is the fourth day.
        self.doc = demand.empty(PROJECT)
        day = demand.DAY
        for d in range(3):
            for i in range(360):
                demand.add_ask(self.doc, HOT, 1, 0,
                               d * day + 18 * 3600.0 + 20 * i)
            for h in range(24):
                demand.add_ask(self.doc, WARM, 1, 0, d * day + h * 3600.0)
        for spec in (HOT, WARM):
            demand.add_fresh(self.doc, spec.key, [120.0])
        self.policy = learning.Policy(configured(
            self, budget_members=8, budget_idle_vm_hours=48.0,
            learn_max_size=8).mlaccel_pool, PROJECT, lambda image_id: True)

    def members(self, at, doc=None):
        doc = doc or self.doc
        return self.policy.members_now(
            doc, at, self.policy.candidates(doc, at),
            self.policy.budget())

    def test_more_members_in_the_busy_hours_fewer_in_the_quiet_ones(self):
        busy = self.members(3 * demand.DAY + 18.5 * 3600.0)
        quiet = self.members(3 * demand.DAY + 6 * 3600.0)
        # The flat share is 48 / 24 = 2 members all day.
        self.assertGreater(busy, 2)
        self.assertLess(quiet, 2)
        self.assertLessEqual(busy, 8)

    def test_what_the_day_spent_bounds_what_is_held(self):
        at = 3 * demand.DAY + 18.5 * 3600.0
        doc = dict(self.doc)
        # The 48 VM-hours all spent over the last 20 hours: none of it
        # leaves the day within a round and a build (65 s), so no member
        # can be kept that long.
        doc['spend'] = [[at - 20 * 3600.0, 2], [at - 4 * 3600.0, 4],
                        [at, 0]]
        self.assertEqual(0, self.members(at, doc))
        _granted, targets = self.policy.targets(doc, at, {})
        self.assertEqual(0, sum(targets.values()))
        # All but 10 s of them spent evenly over the day: what leaves it
        # within 65 s (2 members' time from 5 s on) makes room for 2.
        doc['spend'] = [[at - 24 * 3600.0 + 5.0, 2], [at, 0]]
        self.assertEqual(2, self.members(at, doc))
        # Spent long ago (a day and more): the room is back.
        doc['spend'] = [[at - 3 * demand.DAY, 48], [at - demand.DAY, 0]]
        self.assertGreater(self.members(at, doc), 0)

    def test_a_warm_surplus_stays_a_lead_time_within_the_room(self):
        """Ski rental: a member unwanted for less than a lead time stays.

        Five warm, three wanted now: the two stay while the surplus is
        younger than the lead time (60 s), never beyond the room; then they
        go. Wanted again, the clock starts anew.
        """
        kept = self.policy.kept
        self.assertEqual(5, kept(3, 5, 1000.0, 60.0, room=8))
        self.assertEqual(4, kept(3, 5, 1030.0, 60.0, room=4))
        self.assertEqual(3, kept(3, 5, 1060.0, 60.0, room=8))
        self.assertEqual(5, kept(5, 5, 1070.0, 60.0, room=8))
        self.assertEqual(5, kept(2, 5, 1080.0, 60.0, room=8))
        self.assertEqual(2, kept(2, 5, 1140.0, 60.0, room=8))
        # More wanted than alive: what is wanted.
        self.assertEqual(6, kept(6, 5, 1150.0, 60.0, room=8))

    def test_a_dip_of_the_hour_s_share_rebuilds_nothing(self):
        """Warm members beyond the hour's share stay a lead time, then go.

        With 2 idle VM-hours a day the busy hour's share is smaller than
        what the keys' forecasts ask for; members warm from before stay
        while their forecasts want them, and go a lead time (60 s) later.
        """
        policy = learning.Policy(configured(
            self, budget_members=8, budget_idle_vm_hours=2.0,
            learn_max_size=8).mlaccel_pool, PROJECT, lambda image_id: True)
        at = 3 * demand.DAY + 18.5 * 3600.0
        candidates = policy.candidates(self.doc, at)
        alive = {c.key: c.forecast.target for c in candidates}
        share = policy.members_now(self.doc, at + 60.0, candidates,
                                   policy.budget())
        self.assertGreater(sum(alive.values()), share)   # a surplus
        _granted, targets = policy.targets(self.doc, at, alive)
        self.assertEqual(alive, targets)
        _granted, targets = policy.targets(self.doc, at + 30.0, alive)
        self.assertEqual(alive, targets)
        _granted, targets = policy.targets(self.doc, at + 60.0, alive)
        self.assertEqual(share, sum(targets.values()))


class CloudBudgetTest(testcase.TestCase):
    """Two projects' learners on one real pool store, planning at once.

    The store is a directory, each learner plans in a thread of its own, as
    two pool managers sharing a state_dir do.
    """

    PROJECTS = ('proj-a', 'proj-b')

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.store = pool_store.PoolStore(os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'pools'))
        log = demand.DemandLog(self.store)
        for project in self.PROJECTS:
            for image in ('img-1', 'img-2', 'img-3'):
                spec = pool_spec.PoolSpec(project, image, 'flv')
                for ago in range(0, 600, 20):
                    log.record_ask(spec, 1, 0, now=NOW - ago)
                log.record_fresh(spec, [120.0], now=NOW)

    def learners(self, **overrides):
        return [learning.Learner(self.store, configured(
            self, learn_projects=[project], budget_members=3,
            budget_idle_vm_hours=1000.0, **overrides), project,
            lambda image_id: True) for project in self.PROJECTS]

    def held(self):
        held = {}
        for key in self.store.keys():
            state = self.store.read(key)
            project = pool_store.spec_of(state).project_id
            held[project] = held.get(project, 0) + learning.held(state)
        return held

    def plan_at_once(self, learners):
        start = threading.Barrier(len(learners))

        def plan(learner):
            start.wait()
            learner.plan(now=NOW)
        threads = [threading.Thread(target=plan, args=(learner,))
                   for learner in learners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def test_each_project_alone_is_held_to_its_own_budget(self):
        self.plan_at_once(self.learners())
        self.assertEqual({'proj-a': 3, 'proj-b': 3}, self.held())
        # What each holds is recorded as its day's spend from now on.
        log = demand.DemandLog(self.store)
        for project in self.PROJECTS:
            doc = log.read(project)
            self.assertEqual([[NOW, 3]], doc['spend'])
            self.assertEqual(3 * 60.0, demand.spent(doc, NOW + 60.0))
        # A round that changes nothing records nothing.
        self.learners()[0].plan(now=NOW + 60.0)
        self.assertEqual([[NOW, 3]], log.read('proj-a')['spend'])

    def test_the_cloud_budget_holds_over_all_projects_at_once(self):
        for cloud in ({'cloud_budget_members': 4},
                      {'cloud_budget_idle_vm_hours': 4 * 24.0 + 1}):
            for key in self.store.keys():
                self.store.delete(key)
            self.plan_at_once(self.learners(**cloud))
            held = self.held()
            self.assertEqual(4, sum(held.values()), (cloud, held))
            self.assertLessEqual(max(held.values()), 3)
            # Later rounds keep the members where they are.
            for learner in self.learners(**cloud):
                learner.plan(now=NOW + 60.0)
            self.assertEqual(held, self.held())

    def test_an_operator_pool_of_another_project_counts(self):
        state = pool_store.new_state(
            pool_spec.PoolSpec('proj-b', 'img-9', 'flv'), 0, 5, 1)
        state['members'] = {'vm%d' % i: {
            'server_id': 'vm%d' % i, 'state': pool_store.IDLE,
            'ready_at': NOW, 'idle_since': NOW} for i in range(3)}
        with self.store.transaction('b' * 16, create=state):
            pass
        learner = self.learners(cloud_budget_members=4)[0]
        learner.plan(now=NOW)
        self.assertEqual(1, self.held()['proj-a'])


class RetirementTest(testcase.TestCase):
    """A learned pool no longer asked for, on a real pool store."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.store = pool_store.PoolStore(os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'pools'))
        state = pool_store.new_state(HOT, 0, 5, 1)
        state['origin'] = learning.LEARNED
        state['learned_target'] = 1
        with self.store.transaction(HOT.key, create=state):
            pass

    def plan(self, lingering):
        learning.Learner(self.store, configured(self), PROJECT,
                         lambda image_id: True,
                         lingering=lingering).plan(now=NOW)

    def test_not_retired_while_anything_of_it_lingers(self):
        # No demand recorded: the pool is granted nothing.
        self.plan(lambda key: key == HOT.key)
        self.assertEqual([HOT.key], self.store.keys())
        self.assertEqual(0, self.store.read(HOT.key)['learned_target'])
        self.plan(lambda key: False)
        self.assertEqual([], self.store.keys())

    def test_members_being_built_are_planned_as_alive(self):
        """A member being built is planned with, not planned afresh.

        Planned as if the pool held nothing, a pool whose only member is
        being built may be granted nothing this round and the member again
        the next: its build ended and started over every other round.
        """
        seen = []
        real = learning.Policy.targets

        def targets(policy, doc, now, alive, **kwargs):
            seen.append(dict(alive))
            return real(policy, doc, now, alive, **kwargs)

        with mock.patch.object(learning.Policy, 'targets', targets):
            learning.Learner(self.store, configured(self), PROJECT,
                             lambda image_id: True, lingering=lambda k: True,
                             building=lambda k: 2).plan(now=NOW)
        self.assertEqual([{HOT.key: 2}], seen)
