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

"""Warm pools without foresight: a real trace's arrivals through the policy.

``python -m mlaccel_lab.bench pools-demand [--days 8] [--seed 1]
[--trace FILE] [--chart FILE]`` replays a stream of ML tasks through the
shipped pool policy: each manager round, the replay's demand record
(kept with :mod:`mlaccel.pool.demand`'s own functions, as launches record
it) goes to :class:`mlaccel.pool.learning.Policy`, the code the pool
manager's learner runs, configured through the ``[mlaccel_pool]`` options;
it knows only what the manager would (the asks recorded so far, the fresh
overhead of each key's misses, a key's lead time once one of its members
was built). The stream is drawn from figures of the Alibaba PAI GPU cluster
trace of 2023 shipped with the project (:mod:`mlaccel_lab.experiment.trace`),
or ``--trace FILE`` replays a file of the trace's columns. Policies side by
side, on the same stream:

- ``none``: no pools;
- ``reactive``: today's Little's-law pools (:mod:`mlaccel.pool.sizing`,
  with the options' window and margin) on keys an operator defined in
  advance (the most popular image in each flavor: a guess, not knowledge
  of the stream);
- ``learned`` at three budgets;
- ``hindsight``: the best static number of members per key, chosen with
  the whole stream in hand, at no more member VM-seconds than the learned
  policy spent at each budget (a bound no online operator reaches; the
  table shows the default budget's). A static member costs about a whole
  stream, so that choice may spend much less than the learned policy;
  the ratio at equal member VM-seconds (the next static member kept for
  the share of the stream the rest of the cost pays for) is printed too;
- ``oracle``: every member ready exactly when asked, for free.

``--history-days N`` gives the online policies N days of recorded demand
before the stream, drawn with another seed and not counted; by default
they start knowing nothing.

A member costs from its create request to its claim or deletion (build,
boot, preload and idle); a hit saves the fresh overhead of a VM less the
claim's own. The model's assumptions (lead time, fresh overhead, manager
interval, image popularity, flavors) are printed first. The last line is
``RESULT learned_vs_hindsight_static=<x> saved_share_of_oracle_pct=<y>
hit_rate_pct=<z> idle_s_per_saved_s=<w> budget_exceeded=<n>``, whose
ratio is the one at equal member VM-seconds, at the default budget.
"""

import argparse
import collections
import dataclasses
import heapq
import math

from oslo_config import cfg

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import demand
from mlaccel.pool import learning
from mlaccel.pool import sizing
from mlaccel.pool import spec as pool_spec
from mlaccel_lab.experiment import trace

#: The project every replayed task belongs to.
PROJECT = 'replayed-project'
#: Budgets of the learned policy: (members, idle VM-hours a day); the
#: middle one is the shipped default.
BUDGETS = ((4, 48.0), (8, 96.0), (16, 192.0))
DEFAULT_BUDGET = 1
#: The most members a static or reactive pool of one key may keep.
MAX_STATIC = 12
#: The history's seed is the stream's plus this: another stream.
HISTORY_SEED_OFFSET = 1000


@dataclasses.dataclass
class Outcome:
    """What one policy did over the stream."""

    asked: int = 0
    hits: int = 0
    partial_tasks: int = 0
    missed_tasks: int = 0
    saved_s: float = 0.0
    member_s: float = 0.0
    budget_exceeded: int = 0
    rounds: int = 0

    @property
    def hit_rate_pct(self):
        return 100.0 * self.hits / self.asked if self.asked else 0.0


def spec_of(task):
    return pool_spec.PoolSpec(PROJECT, task.image, task.flavor)


def pool_options(members=0, idle_vm_hours=0.0, **overrides):
    """The ``[mlaccel_pool]`` options of a manager learning ``PROJECT``.

    ``overrides``: other options of the group (name: value).
    """
    conf = cfg.ConfigOpts()
    mlaccel_conf.register_group(conf, mlaccel_conf.pool)
    conf([], project='mlaccel', default_config_files=[])
    for name, value in (('learn', True), ('learn_projects', [PROJECT]),
                        ('budget_members', members),
                        ('budget_idle_vm_hours', idle_vm_hours),
                        *overrides.items()):
        conf.set_override(name, value, group='mlaccel_pool')
    return conf.mlaccel_pool


class Replay:
    """Members of every key over a stream, as a pool manager keeps them.

    :param end: when the replay ends (the same for every part of a stream).
    :param group: the ``[mlaccel_pool]`` options: the demand record's
        bounds, and the budget checked each round.
    :param measured_from: tasks arriving earlier are the policy's history:
        they are served and recorded as any, but neither they nor member
        time before it are counted.

    A policy is ``callable(now, demand document, {key: members alive},
    {key: measured lead time})`` returning ``{key: members wanted}``.
    """

    def __init__(self, tasks, lead, fresh, claim, interval, end, group,
                 measured_from=0.0):
        self.tasks = tasks
        self.lead, self.fresh, self.claim = lead, fresh, claim
        self.interval = interval
        self.end = end
        self.group = group
        self.measured_from = measured_from

    def cost(self, created, until):
        """Member seconds from ``created`` to ``until`` that count."""
        return max(0.0, until - max(created, self.measured_from))

    def run(self, targets):
        ready = collections.defaultdict(list)      # key -> [created]
        building = collections.defaultdict(list)   # key -> [created]
        leads = {}                                  # measured, by key
        doc = demand.empty(PROJECT)
        # (when, key, VMs): fresh overheads the launcher records once its
        # fresh VMs are warm.
        self._warming = []
        budget = learning.budget_of(self.group)
        day = collections.deque()   # (round, members alive after it)
        out = Outcome()
        first = min([0.0] + [t.arrival for t in self.tasks[:1]])
        now, i = self.interval * math.floor(first / self.interval), 0
        while now <= self.end:
            # The tasks that arrive before this round.
            while i < len(self.tasks) and self.tasks[i].arrival < now:
                self._arrive(self.tasks[i], ready, building, leads, doc, out)
                i += 1
            while self._warming and self._warming[0][0] < now:
                _when, key, vms = heapq.heappop(self._warming)
                demand.add_fresh(doc, key, [self.fresh] * vms)
            alive = {}
            for key in set(ready) | set(building):
                self._promote(ready, building, leads, key, now)
                alive[key] = len(ready[key]) + len(building[key])
            wanted = targets(now, doc, alive, leads)
            for key in set(alive) | set(wanted):
                extra = min(alive.get(key, 0) - wanted.get(key, 0),
                            len(ready[key]))
                if extra > 0:
                    # Retired: idle members the policy no longer wants.
                    for created in ready[key][:extra]:
                        out.member_s += self.cost(created, now)
                    del ready[key][:extra]
                more = wanted.get(key, 0) - alive.get(key, 0)
                if more > 0:
                    building[key] += [now] * more
            held = sum(map(len, ready.values())) + sum(
                map(len, building.values()))
            # As the manager records it (an ask's claims come later).
            demand.add_spend(doc, now, held)
            if self._over(day, now, held, budget):
                out.budget_exceeded += 1
            out.rounds += 1
            now += self.interval
        for members in list(ready.values()) + list(building.values()):
            out.member_s += sum(self.cost(created, self.end)
                                for created in members)
        return out

    def _over(self, day, now, held, budget):
        """Whether the members break the budget now, or over the day.

        The day's member-seconds are counted from the members alive after
        each round until the next (claims only lower that: an upper bound).
        """
        day.append((now, held))
        while day and day[0][0] <= now - trace.DAY:
            day.popleft()
        spent = self.interval * sum(n for _t, n in day)
        return held > budget.members or \
            spent > budget.idle_vm_hours * 3600.0 + 1e-6

    def _arrive(self, task, ready, building, leads, doc, out):
        spec = spec_of(task)
        key = spec.key
        self._promote(ready, building, leads, key, task.arrival)
        got = min(task.vms, len(ready[key]))
        for created in ready[key][:got]:
            out.member_s += self.cost(created, task.arrival)
        del ready[key][:got]
        if task.arrival >= self.measured_from:
            out.asked += task.vms
            out.hits += got
            out.saved_s += got * (self.fresh - self.claim)
            if got < task.vms:
                if got:
                    out.partial_tasks += 1
                else:
                    out.missed_tasks += 1
        # As the launcher records it: the ask, then, once they are warm,
        # each fresh VM's overhead.
        demand.add_ask(doc, spec, task.vms, got, task.arrival)
        if task.vms > got:
            heapq.heappush(self._warming, (task.arrival + self.fresh, key,
                                           task.vms - got))
        demand.prune(doc, task.arrival, self.group.demand_records,
                     self.group.demand_max_age)

    def _promote(self, ready, building, leads, key, now):
        done = [c for c in building[key] if c + self.lead <= now]
        if done:
            building[key] = [c for c in building[key]
                             if c + self.lead > now]
            ready[key] += done
            leads[key] = self.lead   # the pool measured its lead time


def learned(group):
    """The shipped policy: :class:`mlaccel.pool.learning.Policy`."""
    policy = learning.Policy(group, PROJECT, lambda image_id: True)

    def targets(now, doc, alive, leads):
        return policy.targets(doc, now, alive, leads)[1]
    return targets


def reactive(keys, group):
    """Little's law on ``keys``, defined before the stream is seen."""
    def targets(now, doc, alive, leads):
        asks = demand.asks_by_key(doc)
        return {key: sizing.target_size(
            sizing.arrival_rate(asks.get(key, ()), now, group.arrival_window),
            leads.get(key) or group.default_lead_time, group.margin, 0,
            MAX_STATIC) for key in keys}
    return targets


def static(counts):
    return lambda now, doc, alive, leads: counts


def static_table(tasks, make_replay):
    """``{key: [Outcome of c static members for c in 0..MAX_STATIC]}``.

    Keys do not share members, so each key's static pools are replayed
    alone (to the same end as the whole stream) at every size.
    """
    by_key = collections.defaultdict(list)
    for task in tasks:
        by_key[spec_of(task).key].append(task)
    return {key: [make_replay(own).run(static({key: c}))
                  for c in range(MAX_STATIC + 1)]
            for key, own in by_key.items()}


def _next_member(table, counts, room=None):
    """``(saved per added VM-second, key, added VM-seconds, saved)``.

    The member that saves the most per added VM-second, among those that
    fit in ``room`` (None: any); None if none saves anything.
    """
    best = None
    for key, rows in table.items():
        c = counts[key]
        if c == MAX_STATIC:
            continue
        more = rows[c + 1].member_s - rows[c].member_s
        gain = rows[c + 1].saved_s - rows[c].saved_s
        if gain > 0 and (room is None or more <= room) and (
                best is None or gain / max(more, 1e-9) > best[0]):
            best = (gain / max(more, 1e-9), key, more, gain)
    return best


def hindsight(table, cost_cap):
    """The best static members per key at no more than ``cost_cap``.

    :param table: see :func:`static_table`.

    Members go, one at a time, to the key whose next one saves the most
    per added VM-second, while the cost allows.
    """
    counts = {key: 0 for key in table}
    cost = sum(rows[0].member_s for rows in table.values())
    while True:
        best = _next_member(table, counts, cost_cap - cost)
        if best is None:
            break
        counts[best[1]] += 1
        cost += best[2]
    return counts


def equal_cost_saved(table, counts, cost_cap):
    """Seconds a static choice saves at exactly ``cost_cap`` VM-seconds.

    A static member costs about a whole stream, so :func:`hindsight`'s
    choice may spend much less than ``cost_cap`` (at the default budget, a
    quarter less than the learned policy): ``counts``' saving plus the
    share of the next best member that the rest of ``cost_cap`` pays for,
    as if that member were kept for that share of the stream (its saving
    taken in proportion: the bound of a choice that may change its
    members once).
    """
    saved = sum(rows[counts[key]].saved_s for key, rows in table.items())
    cost = sum(rows[counts[key]].member_s for key, rows in table.items())
    best = _next_member(table, counts)
    if best is None or cost >= cost_cap:
        return saved
    return saved + best[3] * min(1.0, (cost_cap - cost) / max(best[2],
                                                              1e-9))


def ratio(learned_out, hindsight_out):
    """Seconds the learned policy saved per second hindsight's saved."""
    if hindsight_out.saved_s:
        return learned_out.saved_s / hindsight_out.saved_s
    return float('inf') if learned_out.saved_s else 1.0


def draw_chart(path, learned_outs, hindsight_outs, oracle_saved):
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot
    fig, ax = pyplot.subplots(figsize=(6, 4))
    for outs, style, label in (
            (learned_outs, 'o-', 'learned (three budgets)'),
            (hindsight_outs, 's--', 'hindsight static, at each one\'s cost')):
        ax.plot([o.member_s / 3600 for o in outs],
                [o.saved_s / 3600 for o in outs], style, label=label)
    ax.axhline(oracle_saved / 3600, linestyle='--', color='grey',
               label='oracle (no idle cost)')
    ax.set_xlabel('member VM-hours (create to claim or deletion)')
    ax.set_ylabel('user waiting hours saved')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m mlaccel_lab.bench pools-demand',
        description=__doc__.split('\n')[0])
    parser.add_argument('--days', type=float, default=8.0,
                        help='days of tasks replayed')
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--trace', metavar='FILE',
                        help='replay this file of the trace\'s columns '
                             'instead of a stream drawn from the shipped '
                             'figures')
    parser.add_argument('--images', type=int, default=6,
                        help='images of the Zipf popularity model')
    parser.add_argument('--lead', type=float, default=120.0,
                        help='seconds from a member\'s create request to '
                             'its warm daemon')
    parser.add_argument('--fresh', type=float, default=120.0,
                        help='seconds a VM created for a task keeps it '
                             'waiting (its fresh overhead)')
    parser.add_argument('--claim', type=float, default=1.0,
                        help='seconds a claim of a warm member takes')
    parser.add_argument('--interval', type=float, default=60.0,
                        help='seconds between two pool manager rounds')
    parser.add_argument('--history-days', type=float, default=0.0,
                        help='days of demand the online policies (reactive '
                             'and learned) have recorded before the '
                             'measured stream, as a manager running for a '
                             'while has: a stream drawn from the shipped '
                             'figures with another seed, ending where the '
                             'measured one begins; not counted. 0: they '
                             'start knowing nothing')
    parser.add_argument('--chart', metavar='FILE', default='pools-demand.png')
    args = parser.parse_args(argv)

    images = trace.zipf_images(args.images)
    figures = trace.load()
    if args.trace:
        tasks = trace.from_trace(trace.read_rows(args.trace), args.seed,
                                 images, args.days)
        source = 'the tasks of %s' % args.trace
    else:
        tasks = trace.draw(figures, args.days, args.seed, images)
        source = 'a stream drawn from figures of the %s' % figures['source']
    history_seed = args.seed + HISTORY_SEED_OFFSET
    history = [dataclasses.replace(t, arrival=t.arrival
                                   - args.history_days * trace.DAY)
               for t in trace.draw(figures, args.history_days,
                                   history_seed, images)
               ] if args.history_days > 0 else []
    flavors = sorted({t.flavor for t in tasks})
    print('stream: %s; %d tasks, %d VMs over %.1f days (seed %d)'
          % (source, len(tasks), sum(t.vms for t in tasks), args.days,
             args.seed))
    print('history of the online policies: %.1f days, %d tasks drawn with '
          'seed %d before the stream, not counted'
          % (args.history_days, len(history), history_seed))
    print('assumed: images drawn by Zipf (exponent 1) over %d images; '
          'flavors from the trace\'s shapes (%s); one VM per GPU'
          % (args.images, ', '.join(flavors)))
    print('assumed: lead time %.0f s, fresh overhead %.0f s, claim %.0f s, '
          'a manager round every %.0f s, one task per member; every image '
          'visible to the project; a key\'s lead time counts as measured '
          'once one of its members is warm (the default_lead_time option '
          'before)' % (args.lead, args.fresh, args.claim, args.interval))

    end = (tasks[-1].arrival if tasks else 0.0) + args.interval
    unbounded = pool_options(10 ** 6, 24.0 * 10 ** 6)

    def replay(own, group=unbounded):
        return Replay(own, args.lead, args.fresh, args.claim, args.interval,
                      end, group)

    names = {spec_of(t).key: '%s/%s' % (t.image, t.flavor) for t in tasks}
    results = {'none': replay(tasks).run(static({}))}
    operator_keys = [pool_spec.PoolSpec(PROJECT, 'image-1', f).key
                     for f in flavors]
    results['reactive'] = replay(history + tasks).run(
        reactive(operator_keys, unbounded))
    budgets, hindsights, equal, counts = [], [], [], None
    table = static_table(tasks, replay)
    for n, (members, hours) in enumerate(BUDGETS):
        group = pool_options(members, hours, interval=args.interval)
        out = replay(history + tasks, group).run(learned(group))
        results['learned %d/%.0fh' % (members, hours)] = out
        # The best static choice at no more member VM-seconds.
        chosen = hindsight(table, out.member_s)
        budgets.append(out)
        hindsights.append(replay(tasks).run(static(chosen)))
        equal.append(equal_cost_saved(table, chosen, out.member_s))
        if n == DEFAULT_BUDGET:
            default, best, counts = out, hindsights[-1], chosen
    results['hindsight'] = best
    oracle = Outcome(asked=default.asked, hits=default.asked,
                     saved_s=default.asked * (args.fresh - args.claim))
    results['oracle'] = oracle

    print('\n%-18s %6s %6s %8s %8s %7s %10s %11s %7s' % (
        'policy', 'VMs', 'hits', 'partial', 'missed', 'hit %', 'saved s',
        'member s', 'over'))
    for name, out in results.items():
        print('%-18s %6d %6d %8d %8d %7.1f %10.0f %11.0f %7d' % (
            name, out.asked, out.hits, out.partial_tasks, out.missed_tasks,
            out.hit_rate_pct, out.saved_s, out.member_s,
            out.budget_exceeded))
    print('(partial, missed: tasks that got some, none of their VMs from a '
          'pool; over: rounds with more members alive than the budget)')
    print('hindsight static members per key: %s' % ', '.join(
        '%s=%d' % (names[k], n) for k, n in sorted(counts.items()) if n))
    draw_chart(args.chart, budgets, hindsights, oracle.saved_s)
    print('chart: %s' % args.chart)
    within = all(h.member_s <= out.member_s * (1 + 1e-9)
                 for out, h in zip(budgets, hindsights))
    print('checks: same stream for every policy; the learned policy is '
          'the shipped learning.Policy; hindsight spent no more member '
          'VM-seconds than the learned policy at each budget: %s'
          % ('yes' if within else 'NO: the comparison is unfair'))
    print('learned / hindsight static saved, at each budget\'s cost: %s'
          % ', '.join('%d/%.0fh %.2f' % (b[0], b[1], ratio(out, h))
                      for b, out, h in zip(BUDGETS, budgets, hindsights)))
    at_equal_cost = [out.saved_s / saved if saved else float('inf')
                     for out, saved in zip(budgets, equal)]
    print('learned / hindsight static saved at equal member VM-seconds '
          '(the next static member kept for the share of the stream the '
          'rest pays for; the RESULT line\'s ratio): %s' % ', '.join(
              '%d/%.0fh %.3f' % (b[0], b[1], r)
              for b, r in zip(BUDGETS, at_equal_cost)))
    print('RESULT learned_vs_hindsight_static=%.3f '
          'saved_share_of_oracle_pct=%.1f hit_rate_pct=%.1f '
          'idle_s_per_saved_s=%.2f budget_exceeded=%d' % (
              at_equal_cost[DEFAULT_BUDGET],
              100.0 * default.saved_s / oracle.saved_s
              if oracle.saved_s else 0.0, default.hit_rate_pct,
              default.member_s / default.saved_s if default.saved_s
              else float('inf'),
              sum(out.budget_exceeded for out in budgets)))
    return 0 if within else 1
