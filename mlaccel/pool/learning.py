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

"""Learned pools: made, sized and retired by the manager from the demand.

Off unless ``[mlaccel_pool] learn`` is set, and then only for the projects
in ``learn_projects`` (and, when they are set, the images and flavors in
``learn_images`` and ``learn_flavors``). Each round the manager forecasts
every recorded key of its project (:mod:`mlaccel.pool.forecast`), allocates
members under the budget (:mod:`mlaccel.pool.allocation`: at most
``budget_members`` at once, and the idle VM-hours a day spent in the hours
the project's recorded days were busy, never more over any 24 hours than
``budget_idle_vm_hours``), makes a pool for a key that is granted members
and has none, gives each learned pool its target (a warm member the hour
no longer wants stays a lead time more: :meth:`Policy.kept`), and deletes
a learned pool that is granted nothing and holds no member. A pool an
operator made is never touched: its key is left out of the allocation, and
its members count against the budget first. An image the project cannot
see in Glance is never pooled.
"""

import contextlib
import time

from oslo_log import log as logging

from mlaccel.pool import allocation
from mlaccel.pool import demand as pool_demand
from mlaccel.pool import forecast
from mlaccel.pool import store as pool_store

LOG = logging.getLogger(__name__)

#: ``state['origin']`` of a pool the manager made from demand.
LEARNED = 'learned'
#: Seconds a claim of a warm member itself takes (a new token, a check with
#: Nova): what a hit does not save of the fresh overhead.
CLAIM_SECONDS = 1.0


#: The store document whose lock a round of learning holds when a
#: cloud-wide budget is set.
BUDGET_LOCK = 'cloudbudget'
BUDGET_SUFFIX = '.budget'


def is_learned(state):
    return state.get('origin') == LEARNED


def held(state):
    """Members a pool holds against a budget.

    Its warm ones, and for a learned pool those its target is about to make.
    """
    warm = len(pool_store.members(state, pool_store.IDLE))
    if is_learned(state):
        return max(warm, state.get('learned_target', 0))
    return warm


def budget_of(group):
    return allocation.Budget(group.budget_members,
                             group.budget_idle_vm_hours)


def cloud_cap(group):
    """The most members all projects' pools may hold; None: no bound."""
    caps = []
    if group.cloud_budget_members is not None:
        caps.append(group.cloud_budget_members)
    if group.cloud_budget_idle_vm_hours is not None:
        caps.append(allocation.members_for(group.cloud_budget_idle_vm_hours))
    return min(caps) if caps else None


def allowed(group, project_id, spec):
    """Whether the operator's policy lets ``spec``'s key be learned."""
    return (group.learn and project_id in group.learn_projects
            and (not group.learn_images or spec.image_id in group.learn_images)
            and (not group.learn_flavors
                 or spec.flavor_id in group.learn_flavors))


class Policy:
    """What the learned pools of one project should hold; no I/O.

    The manager's :class:`Learner` feeds it from the pool store; the lab's
    replay (``python -m mlaccel_lab.bench pools-demand``) from a simulated
    stream: both run this same code.

    :param group: the ``[mlaccel_pool]`` options.
    :param visible: ``callable(image_id) -> bool``, whether the project
        can boot the image (Glance shows it to the project).
    """

    def __init__(self, group, project_id, visible):
        self.group = group
        self.project_id = project_id
        self.visible = visible
        self._refused = set()
        self._surplus_since = None   # since when members alive were unwanted

    def budget(self, reserved=0, others=0):
        """The budget left to the learned pools.

        :param reserved: warm members of the project's operator pools.
        :param others: members of other projects' pools, alive or about
            to be (the cloud-wide budget's share they hold).
        """
        budget = budget_of(self.group)
        members = budget.members - reserved
        cloud = cloud_cap(self.group)
        if cloud is not None:
            members = min(members, cloud - reserved - others)
        return allocation.Budget(
            max(0, members),
            max(0.0, budget.idle_vm_hours - 24.0 * reserved))

    def candidates(self, doc, now, leads=None, manual=()):
        """The :class:`~mlaccel.pool.allocation.Candidate` of each key.

        :param doc: the project's demand document
            (:mod:`mlaccel.pool.demand`).
        :param leads: ``{key: measured lead time or None}`` of its pools.
        :param manual: the keys of operators' pools, never learned.
        """
        leads = leads or {}
        since = pool_demand.recorded_since(doc)
        candidates = []
        for key, history in pool_demand.asks_by_key(doc).items():
            entry = doc['keys'].get(key)
            if key in manual or entry is None or \
                    entry['fresh_overhead_s'] is None:
                continue   # an operator's pool, or no saving measured yet
            spec = pool_demand.spec_of(doc, key)
            if not allowed(self.group, self.project_id, spec):
                continue
            if not self.visible(spec.image_id):
                if key not in self._refused:
                    LOG.warning('Key %s is not pooled: image %s is not one '
                                'project %s can boot', key, spec.image_id,
                                self.project_id)
                self._refused.add(key)
                continue
            lead = leads.get(key) or self.group.default_lead_time
            candidates.append(allocation.Candidate(
                key, self.project_id,
                forecast.forecast(history, now, lead, since=since),
                max(0.0, entry['fresh_overhead_s'] - CLAIM_SECONDS), lead,
                self.group.learn_max_size))
        return candidates

    def lead(self, candidates):
        """The longest lead time of the candidates (else the default)."""
        return max([c.lead for c in candidates],
                   default=self.group.default_lead_time)

    def room(self, doc, now, candidates, budget):
        """The most learned members the budget lets be alive now.

        At most ``budget.members``, and no more than every 24 hours
        ending before they can next be retired (a round and a build from
        now) leave for them.
        """
        horizon = self.group.interval + self.lead(candidates)
        return min(budget.members, allocation.spend_room(
            budget, pool_demand.spent(doc, now), horizon,
            pool_demand.leaving(doc, now, horizon)))

    def members_now(self, doc, now, candidates, budget):
        """The learned members the day's budget spends on the hour now.

        Of the day's idle VM-hours, the share of the hour now
        (:func:`~mlaccel.pool.allocation.paced`, by the project's
        :func:`~mlaccel.pool.forecast.day_shape`), within :meth:`room`.
        """
        asks = [(t, n) for history in pool_demand.asks_by_key(doc).values()
                for t, n in history]
        shape = forecast.day_shape(
            asks, now, since=pool_demand.recorded_since(doc))
        return min(allocation.paced(allocation.member_densities(candidates),
                                    budget, shape),
                   self.room(doc, now, candidates, budget))

    def kept(self, wanted, alive, now, lead, room):
        """Members to hold now: ``wanted``, or the warm ones a while more.

        Members alive beyond what the hour now wants stay, within
        ``room``, until the surplus has lasted a lead time: keeping a warm
        member that long costs what building it again would, so a dip of
        the hour's share that passes within it costs no rebuild, and one
        that lasts costs at most twice what knowing it in advance would
        (the ski-rental rule). Measured with ``python -m mlaccel_lab.bench
        pools-demand``: see the pools guide.
        """
        if alive <= wanted:
            self._surplus_since = None
            return wanted
        if self._surplus_since is None:
            self._surplus_since = now
        if now - self._surplus_since < lead:
            return max(wanted, min(alive, room))
        return wanted

    def targets(self, doc, now, alive, leads=None, manual=(), reserved=0,
                others=0):
        """``(Allocation, {key: members to hold})`` of the learned pools.

        :param alive: ``{key: warm members}`` of the learned pools.
        :param reserved: warm members of the operators' pools, which count
            against the budget first.
        :param others: see :meth:`budget`.

        A key's target is what the allocation grants it, capped so that
        the members alive stay within the budget while a smaller
        allocation's surplus is claimed or retired.
        """
        candidates = self.candidates(doc, now, leads, manual)
        budget = self.budget(reserved, others)
        members = self.kept(
            self.members_now(doc, now, candidates, budget),
            sum(alive.values()), now, self.lead(candidates),
            self.room(doc, now, candidates, budget))
        budget = allocation.Budget(members, 24.0 * members)
        granted = allocation.allocate(candidates, budget)
        create = allocation.to_create(granted.members, alive, budget)
        targets = {key: min(granted.members.get(key, 0),
                            alive.get(key, 0) + create.get(key, 0))
                   for key in set(granted.members) | set(alive)}
        return granted, targets


class Learner:
    """The learned pools of one project in one store.

    :param visible: ``callable(image_id) -> bool``, whether the project
        can boot the image (Glance shows it to the project).
    :param lingering: ``callable(key) -> bool``, whether a pool without
        members still has something of its own in the cloud (its manager's
        :meth:`~mlaccel.pool.manager.PoolManager.lingering`: builds in
        flight, servers in Nova): such a pool is not retired, so that its
        manager goes on tending it until nothing of it is left.
    :param building: ``callable(key) -> int``, members of a pool being
        built (its manager's :meth:`~mlaccel.pool.manager.PoolManager.
        building`): they are planned with as alive, or a round that does
        not see them would plan the pool afresh and undo their builds.
    """

    def __init__(self, store, conf, project_id, visible, lingering=None,
                 building=None):
        self.store = store
        self.lingering = lingering or (lambda key: False)
        self.building = building or (lambda key: 0)
        self.group = conf.mlaccel_pool
        self.log = pool_demand.DemandLog.from_conf(store, conf)
        self.project_id = project_id
        self.policy = Policy(self.group, project_id, visible)
        self.last = None   # the last round's Allocation

    def plan(self, now=None):
        """Allocate and apply targets to the store; the Allocation.

        Makes the pools of newly granted keys, sets every learned pool's
        target (:meth:`Policy.targets`), deletes the learned pools
        granted nothing that hold no member, and records what the learned
        pools hold (the day's spend, :func:`~mlaccel.pool.demand.spent`).
        With a cloud-wide budget the whole round runs under the store's
        budget lock, so two projects' managers never hand out the same
        room.
        """
        now = time.time() if now is None else now
        with (self.store.transaction(BUDGET_LOCK, create={},
                                     suffix=BUDGET_SUFFIX)
              if cloud_cap(self.group) is not None
              else contextlib.nullcontext()):
            return self._plan(now)

    def _plan(self, now):
        states = {}
        for key in self.store.keys():
            try:
                states[key] = self.store.read(key)
            except pool_store.NoSuchPool:
                continue
        ours = {k: s for k, s in states.items()
                if pool_store.spec_of(s).project_id == self.project_id}
        manual = {k for k, s in ours.items() if not is_learned(s)}
        idle = {k: len(pool_store.members(s, pool_store.IDLE))
                for k, s in ours.items()}
        # Warm members and those being built: a claimed one is its task's
        # VM now.
        alive = {k: n + self.building(k) for k, n in idle.items()
                 if k not in manual}
        doc = self.log.read(self.project_id)
        granted, targets = self.policy.targets(
            doc, now, alive,
            leads={k: s['stats']['lead_time_s'] for k, s in ours.items()},
            manual=manual, reserved=sum(idle[k] for k in manual),
            others=sum(held(s) for k, s in states.items() if k not in ours))
        for key, target in targets.items():
            self._apply(key, doc, target)
        # What the learned pools hold until the next round: their members
        # alive, or their targets while more are being built.
        learned = {k for k in ours if k not in manual} | set(targets)
        held_now = sum(max(alive.get(k, 0), targets.get(k, 0))
                       for k in learned)
        if pool_demand.holding(doc) != held_now:
            self.log.record_spend(self.project_id, held_now, now)
        self.last = granted
        return granted

    def _apply(self, key, doc, target):
        if not self.store.exists(key):
            if target <= 0:
                return
            spec = pool_demand.spec_of(doc, key)
            state = pool_store.new_state(spec, 0, self.group.learn_max_size,
                                         self.group.max_tasks)
            state['origin'] = LEARNED
            state['learned_target'] = target
            with self.store.transaction(key, create=state):
                pass
            LOG.info('Learned pool %s made for image %s, flavor %s: %d '
                     'member(s)', key, spec.image_id, spec.flavor_id, target)
            return
        with self.store.transaction(key) as state:
            if not is_learned(state):
                return
            state['learned_target'] = target
            empty = not state['members']
        if target <= 0 and empty and not self.lingering(key):
            try:
                self.store.delete(key)
                LOG.info('Learned pool %s retired: no demand left', key)
            except ValueError:
                pass   # a member appeared meanwhile: next round
