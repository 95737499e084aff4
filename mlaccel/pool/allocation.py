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

"""Warm members under a budget, where they save the most waiting per cost.

Each candidate key brings its :class:`~mlaccel.pool.forecast.Forecast`,
its lead time and the seconds a hit saves a user (its measured fresh
overhead less a claim's own). Its ``m``-th warm member is asked for within
a lead time with the forecast's chance ``p_m``: over each lead time it
then saves ``saving × p_m`` seconds of waiting and sits idle the whole
lead time otherwise. Members are granted in the order of that value
density, saved seconds per idle second (``saving × p_m / (lead × (1 -
p_m))``, about ``saving`` times the key's asks per second), the idea the
mirror-volume cache evicts by, until the forecast's target of each key is
met or a budget would be exceeded: the most members (overall and per
project) and the most idle VM-hours a day. A key's members come in order
(its ``m``-th before its ``m + 1``-th). A member alive has no claim to
its place: once another key's member is worth more, it goes (a member
kept while its key was still asked for now and then held its place for
hours over keys asked for more). :func:`to_create` keeps members being
built within the same bounds, so no budget is ever exceeded.

The idle VM-hours a day are spent where the day is busy (:func:`paced`):
the ``H`` member-hours of the next 24 go to the hours and members of the
most value, each member's density times its hour's shape
(:func:`mlaccel.pool.forecast.day_shape`), at most ``members`` in any hour;
the hour now gets its share of those. On a flat day (nothing known of its
rhythm) that is ``H / 24`` members all day. :func:`spend_room` bounds the
members by what the last 24 hours already spent, less what of it leaves
those 24 hours while the members are alive, so the members' time over any
day stays within ``H`` whatever the forecast says.
"""

import dataclasses
import heapq

#: Chance at or above which a member counts as never idle.
SURE = 1.0 - 1e-9


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A key that may be kept warm.

    :ivar saving: seconds a hit saves (fresh overhead less a claim's).
    :ivar lead: seconds from a member's create request to its being warm,
        the window of the forecast's chances.
    :ivar max_size: the most members it may get (its pool's bound).
    """

    key: str
    project_id: str
    forecast: object
    saving: float
    lead: float
    max_size: int = 1000


@dataclasses.dataclass(frozen=True)
class Budget:
    """What warm members may cost.

    :ivar members: the most warm members overall.
    :ivar idle_vm_hours: the most idle VM-hours a day overall.
    :ivar project_members: ``{project id: most members}``.
    :ivar project_idle_vm_hours: ``{project id: most idle VM-hours a day}``.
    """

    members: int
    idle_vm_hours: float
    project_members: dict = dataclasses.field(default_factory=dict)
    project_idle_vm_hours: dict = dataclasses.field(default_factory=dict)


def density(saving, chance, lead):
    """Saved seconds per idle second of a member.

    :param chance: the chance that it is asked for within ``lead``
        seconds. (A chance per lead time grows with the lead time; the
        saving per idle second does not.)
    """
    if chance <= 0 or saving <= 0:
        return 0.0
    if chance >= SURE:
        return float('inf')
    return saving * chance / ((1.0 - chance) * lead)


def member_densities(candidates):
    """Density of every member the candidates' forecasts ask for."""
    return [density(c.saving, c.forecast.chance(m), c.lead)
            for c in candidates
            for m in range(1, min(c.forecast.target, c.max_size) + 1)]


def paced(densities, budget, shape):
    """Members warm now, of the day's ``budget.idle_vm_hours``.

    :param densities: each member's density (:func:`member_densities`).
    :param shape: ``shape[i]``, how busy hour ``i`` from now is against the
        day's mean (:func:`mlaccel.pool.forecast.day_shape`).

    Every hour offers its ``budget.members`` most valuable members, each
    one member-hour worth its density times the hour's shape; the day's
    ``idle_vm_hours`` member-hours go to the most valuable offers, and the
    hour now keeps the members it won (a tie goes to the later hour, so
    that no hour wins a tie it would lose an hour later).
    """
    best = sorted((d for d in densities if d > 0),
                  reverse=True)[:budget.members]
    offers = sorted((-(d * factor), -hour) for hour, factor in
                    enumerate(shape) if factor > 0 for d in best)
    hours = int(budget.idle_vm_hours + 1e-9)
    return sum(1 for _value, hour in offers[:hours] if hour == 0)


def spend_room(budget, spent_s, horizon, leaving=()):
    """Members alive for ``horizon`` s that keep every day within budget.

    :param spent_s: member-seconds spent over the 24 hours up to now.
    :param horizon: seconds until the members can next be retired.
    :param leaving: ``(x, member-seconds)`` pairs: how much of
        ``spent_s`` the 24 hours ending ``x`` seconds from now no longer
        hold, for ``x`` at each change of the recorded spend within the
        horizon and at the horizon
        (:func:`mlaccel.pool.demand.leaving`). Every 24 hours ending
        within the horizon must hold the members' time beside what of the
        spend is still in them. None given: all of it is (the tightest
        bound).
    """
    left = budget.idle_vm_hours * 3600.0 - spent_s
    if horizon <= 0 or left < 0:
        return 0
    # Between two changes, what leaves grows at a constant rate: the
    # tightest of those days ends at a change or at the horizon.
    return max(0, min(int((left + gone) // x)
                      for x, gone in (tuple(leaving) or ((horizon, 0.0),))
                      if x > 0))


def members_for(idle_vm_hours):
    """Members alive at once that ``idle_vm_hours`` a day allow."""
    return max(0, int(idle_vm_hours // 24.0 + 1e-9))


def member_cap(budget, project=None):
    """The most members alive at once, each counted idle all day."""
    members, hours = budget.members, budget.idle_vm_hours
    if project is not None:
        members = min(members, budget.project_members.get(project, members))
        hours = min(hours, budget.project_idle_vm_hours.get(project, hours))
    return max(0, min(members, members_for(hours)))


@dataclasses.dataclass
class Allocation:
    """Members per key, what they cost and what the budget refused.

    :ivar members: ``{key: members}`` (keys granted none are absent).
    :ivar idle_vm_hours: the most idle VM-hours a day they can cost.
    :ivar refused: ``{key: members the forecast asked for but the budget
        did not grant}``.
    """

    members: dict
    idle_vm_hours: float
    refused: dict

    @property
    def total(self):
        return sum(self.members.values())


def allocate(candidates, budget):
    """The :class:`Allocation` of ``candidates`` under ``budget``."""
    heap = []

    def push(order, m, c, wanted):
        heapq.heappush(heap, (-density(c.saving, c.forecast.chance(m),
                                       c.lead), order, m, c, wanted))

    for order, c in enumerate(candidates):
        wanted = min(c.forecast.target, c.max_size)
        if wanted > 0:
            push(order, 1, c, wanted)
    members, refused, per_project = {}, {}, {}
    total = 0
    cap = member_cap(budget)
    while heap:
        neg, order, m, c, wanted = heapq.heappop(heap)
        project = c.project_id
        if -neg <= 0 or total + 1 > cap or per_project.get(
                project, 0) + 1 > member_cap(budget, project):
            # Its later members are worth no more: none of them is granted.
            refused[c.key] = wanted - m + 1
            continue
        members[c.key] = m
        total += 1
        per_project[project] = per_project.get(project, 0) + 1
        if m < wanted:
            push(order, m + 1, c, wanted)
    return Allocation(members, 24.0 * total, refused)


def to_create(members, alive, budget, project_of=None):
    """``{key: members to create now}`` towards ``members``.

    :param members: ``{key: members wanted}`` (an allocation's).
    :param alive: ``{key: members alive}``, idle or being built: the ones
        a smaller allocation no longer wants go only as they are claimed
        or retired, so new ones are made only while the totals (overall,
        and per project by ``project_of[key]``) stay within the budget.
    """
    project_of = project_of or {}
    room = member_cap(budget) - sum(alive.values())
    rooms = {}
    for key, count in alive.items():
        project = project_of.get(key)
        rooms[project] = rooms.get(project, 0) + count
    rooms = {project: member_cap(budget, project) - count
             for project, count in rooms.items()}
    create = {}
    for key, wanted in sorted(members.items(), key=lambda kv: -kv[1]):
        project = project_of.get(key)
        more = min(wanted - alive.get(key, 0), room,
                   rooms.get(project, member_cap(budget, project)))
        if more > 0:
            create[key] = more
            room -= more
            rooms[project] = rooms.get(
                project, member_cap(budget, project)) - more
    return create
