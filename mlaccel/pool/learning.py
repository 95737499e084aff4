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
members under the budget (:mod:`mlaccel.pool.allocation`), makes a pool for
a key that is granted members and has none, gives each learned pool its
target, and deletes a learned pool that is granted nothing and holds no
member. A pool an operator made is never touched: its key is left out of
the allocation, and its members count against the budget first. An image
the project cannot see in Glance is never pooled.
"""

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


def is_learned(state):
    return state.get('origin') == LEARNED


def budget_of(group):
    return allocation.Budget(group.budget_members,
                             group.budget_idle_vm_hours)


def allowed(group, project_id, spec):
    """Whether the operator's policy lets ``spec``'s key be learned."""
    return (group.learn and project_id in group.learn_projects
            and (not group.learn_images or spec.image_id in group.learn_images)
            and (not group.learn_flavors
                 or spec.flavor_id in group.learn_flavors))


class Learner:
    """The learned pools of one project in one store.

    :param visible: ``callable(image_id) -> bool``, whether the project
        can boot the image (Glance shows it to the project).
    """

    def __init__(self, store, conf, project_id, visible):
        self.store = store
        self.group = conf.mlaccel_pool
        self.log = pool_demand.DemandLog.from_conf(store, conf)
        self.project_id = project_id
        self.visible = visible
        self._refused = set()
        self.last = None   # the last round's Allocation

    def _candidates(self, doc, ours, manual, now):
        asks = {}
        for t, key, vms, _claimed in doc['asks']:
            asks.setdefault(key, []).append((t, vms))
        candidates = []
        for key, history in asks.items():
            entry = doc['keys'].get(key)
            if key in manual or entry is None or \
                    entry['fresh_overhead_s'] is None:
                continue   # an operator's pool, or no saving measured yet
            spec = self.log.spec_of(doc, key)
            if not allowed(self.group, self.project_id, spec):
                continue
            if not self.visible(spec.image_id):
                if key not in self._refused:
                    LOG.warning('Key %s is not pooled: image %s is not one '
                                'project %s can boot', key, spec.image_id,
                                self.project_id)
                self._refused.add(key)
                continue
            # The pool's measured lead time, read with the round's states.
            lead = (ours[key]['stats']['lead_time_s'] if key in ours
                    else None) or self.group.default_lead_time
            candidates.append(allocation.Candidate(
                key, self.project_id, forecast.forecast(history, now, lead),
                max(0.0, entry['fresh_overhead_s'] - CLAIM_SECONDS),
                self.group.learn_max_size))
        return candidates

    def plan(self, now=None):
        """Allocate and apply targets to the store; the Allocation.

        Makes the pools of newly granted keys, sets every learned pool's
        target (capped so members alive stay within the budget), and
        deletes the learned pools granted nothing that hold no member.
        """
        now = time.time() if now is None else now
        states = {}
        for key in self.store.keys():
            try:
                states[key] = self.store.read(key)
            except pool_store.NoSuchPool:
                continue
        ours = {k: s for k, s in states.items()
                if pool_store.spec_of(s).project_id == self.project_id}
        manual = {k for k, s in ours.items() if not is_learned(s)}
        budget = budget_of(self.group)
        reserved = sum(len(pool_store.members(s, pool_store.IDLE))
                       for k, s in ours.items() if k in manual)
        budget = allocation.Budget(max(0, budget.members - reserved),
                                   max(0.0, budget.idle_vm_hours
                                       - 24.0 * reserved))
        doc = self.log.read(self.project_id)
        candidates = self._candidates(doc, ours, manual, now)
        granted = allocation.allocate(candidates, budget)
        # Warm members: a claimed one is its task's VM now.
        alive = {k: len(pool_store.members(s, pool_store.IDLE))
                 for k, s in ours.items() if k not in manual}
        create = allocation.to_create(granted.members, alive, budget)
        for key in set(granted.members) | set(alive):
            target = min(granted.members.get(key, 0),
                         alive.get(key, 0) + create.get(key, 0))
            self._apply(key, doc, target)
        self.last = granted
        return granted

    def _apply(self, key, doc, target):
        if not self.store.exists(key):
            if target <= 0:
                return
            spec = self.log.spec_of(doc, key)
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
        if target <= 0 and empty:
            try:
                self.store.delete(key)
                LOG.info('Learned pool %s retired: no demand left', key)
            except ValueError:
                pass   # a member appeared meanwhile: next round
