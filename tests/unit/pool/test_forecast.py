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

"""The demand forecast and the budgeted allocation of warm members."""

import random

from mlaccel.pool import allocation
from mlaccel.pool import demand
from mlaccel.pool import forecast
from mlaccel.pool import sizing
from tests import testcase

DAY = forecast.DAY
LEAD = 120.0


def bursts(days, at, size, spread=10.0):
    """A burst of ``size`` one-VM asks at ``at`` seconds into each day."""
    return [(day * DAY + at + i * spread, 1)
            for day in range(days) for i in range(size)]


class ForecastTest(testcase.TestCase):

    def test_window_counts(self):
        asks = [(0.0, 1), (5.0, 2), (10.0, 3)]
        self.assertEqual([3, 5, 3, 0],
                         forecast.window_counts(asks, [0, 5, -1, 11], 10.0))

    def test_quantile_by_nearest_rank(self):
        self.assertEqual(0, forecast.quantile([], 0.9))
        self.assertEqual(8, forecast.quantile(list(range(10)), 0.9))
        self.assertEqual(4, forecast.quantile([4], 0.5))

    def test_no_asks_forecast_nothing(self):
        f = forecast.forecast([], 1000.0, LEAD)
        self.assertEqual((0, (), 0), (f.target, f.tail, f.windows))
        self.assertEqual(0.0, f.chance(1))

    def test_a_daily_burst_is_expected_before_it_comes_again(self):
        """At 9:00 the burst of 9:00 on past days is what counts.

        Little's law on the last ten minutes, quiet since yesterday, keeps
        nothing warm; the forecast keeps the burst's size.
        """
        nine = 9 * 3600.0
        asks = bursts(5, nine, size=6)
        now = 5 * DAY + nine - 60.0
        f = forecast.forecast(asks, now, LEAD)
        self.assertEqual(6, f.target)
        reactive = sizing.target_size(
            sizing.arrival_rate(asks, now, 600.0), LEAD, 0.2, 0, 100)
        self.assertEqual(0, reactive)
        # Far from 9:00 and from any recent ask, nothing is kept.
        self.assertEqual(0, forecast.forecast(
            asks, 5 * DAY + nine + 6 * 3600.0, LEAD).target)

    def test_a_burst_going_on_now_counts(self):
        now = 10 * DAY
        asks = [(now - 300.0 + i, 1) for i in range(4)]
        self.assertEqual(4, forecast.forecast(asks, now, LEAD).target)

    def test_coverage_is_the_time_the_next_lead_time_held_so_many(self):
        # Lead 10: the window starting at s holds the asks in [s, s + 10).
        asks = [(20.0, 1), (25.0, 2)]
        seconds = forecast.coverage(asks, 0.0, 100.0, 10.0)
        # s in (10, 15]: 1 VM; (15, 20]: 3; (20, 25]: 2; the rest: none.
        self.assertEqual({0: 85.0, 1: 5.0, 2: 5.0, 3: 5.0}, dict(seconds))
        self.assertEqual((0.15, 0.1, 0.05),
                         forecast.share_at_least(seconds, 3))
        self.assertEqual((0.0, 0.0), forecast.share_at_least({}, 2))
        # Asks no window of [0, 100) holds change nothing; one just inside
        # the last window does.
        outside = [(-50.0, 1), (0.0, 4)] + asks + [(110.0, 3), (200.0, 1)]
        self.assertEqual(dict(seconds), dict(
            forecast.coverage(outside, 0.0, 100.0, 10.0)))
        self.assertEqual(5.0, forecast.coverage(
            asks + [(105.0, 1)], 0.0, 100.0, 10.0)[1] - seconds[1])

    def test_chance_of_a_member_is_a_share_of_time_not_of_days(self):
        """Asked once an hour for a week: about lead / hour of chance.

        A warm member waits about an hour, so its chance within one lead
        time is about lead / hour, not "asked every day".
        """
        asks = [(h * 3600.0, 1) for h in range(7 * 24)]
        f = forecast.forecast(asks, 7 * DAY + 1800.0, LEAD)
        self.assertEqual(1, f.target)
        # Six daily windows of two hours, each with two lead times held
        # by an ask (the seventh began half an hour before the record);
        # the last half hour, with none; and the week before it, from
        # 0:30 on the first day, with the 167 asks after then.
        self.assertAlmostEqual(
            (6 * 2 + 167) * LEAD / (6 * 7200.0 + 1800.0 + 7 * DAY - 1800.0),
            f.chance(1), places=9)
        self.assertAlmostEqual(LEAD / 3600.0, f.chance(1), places=2)
        self.assertEqual(0.0, f.chance(2))

    def test_one_recent_ask_does_not_make_a_rare_key_likely(self):
        """The horizons' time is pooled, not the larger share taken.

        A key asked for twice a day, last ten minutes ago, against one
        asked for every quarter of an hour for a week: the half hour's one
        ask said a lead time in half an hour, as likely as the steady key,
        when the week says a sixth of that.
        """
        now = 7 * DAY + 12 * 3600.0
        steady = [(t * 900.0, 1) for t in range(int(now // 900.0))]
        rare = [(day * DAY + h * 3600.0, 1) for day in range(7)
                for h in (3, 15)] + [(now - 600.0, 1)]
        steady_f = forecast.forecast(steady, now, LEAD)
        rare_f = forecast.forecast(rare, now, LEAD)
        self.assertEqual(1, rare_f.target)   # the ask still counts
        self.assertGreater(rare_f.chance(1), 0.0)
        self.assertLess(rare_f.chance(1), steady_f.chance(1) / 4)
        # The recent half hour alone held an ask for a lead time of it.
        recent = forecast.share_at_least(
            forecast.coverage(rare, now - 1800.0, now, LEAD), 1)[0]
        self.assertAlmostEqual(LEAD / 1800.0, recent)
        self.assertGreater(recent, steady_f.chance(1) / 2)

    def test_a_recurring_burst_is_likely_around_its_time_of_day(self):
        # Day d brings a burst of d % 3 + 1 VMs at 1:00, one every 10 s.
        asks = [a for day in range(7)
                for a in bursts(1, day * DAY + 3600.0, size=day % 3 + 1)]
        # The record began at midnight of the first day.
        at_one = forecast.forecast(asks, 7 * DAY + 3600.0, LEAD, since=0.0)
        # Seven daily peaks (1, 2, 3, 1, 2, 3, 1) and the recent one (0).
        self.assertEqual(8, at_one.windows)
        self.assertEqual(3, at_one.target)
        self.assertEqual(3, len(at_one.tail))
        self.assertGreater(at_one.chance(1), at_one.chance(2))
        self.assertGreater(at_one.chance(2), at_one.chance(3))
        self.assertGreater(at_one.chance(3), 0.0)
        self.assertEqual(0.0, at_one.chance(4))
        # Twelve hours later the daily horizon holds none of the bursts:
        # nothing to keep warm, though the week still says they come.
        at_one_pm = forecast.forecast(asks, 7 * DAY + 13 * 3600.0, LEAD,
                                      since=0.0)
        self.assertEqual(0, at_one_pm.target)
        self.assertLess(at_one_pm.chance(1), at_one.chance(1) / 4)

    def test_a_key_first_asked_now_was_watched_since_the_record_began(self):
        """The days before a key's first ask count: it was not asked for.

        One ask a minute ago of a key new to a week-old record is no
        likelier than the key asked for once an hour all week; from its
        own first ask on, the half hour would have said a lead time in
        half an hour.
        """
        now = 7 * DAY + 12 * 3600.0
        hourly = [(h * 3600.0, 1) for h in range(int(now // 3600.0))]
        new = [(now - 60.0, 1)]
        watched = forecast.forecast(new, now, LEAD, since=0.0)
        self.assertEqual(1, watched.target)
        self.assertLess(watched.chance(1),
                        forecast.forecast(hourly, now, LEAD,
                                          since=0.0).chance(1))
        self.assertAlmostEqual(LEAD / 1800.0,
                               forecast.forecast(new, now, LEAD).chance(1))
        # One lead time held (in the recent half hour) out of the week
        # (the half hour and the days before it) and the daily windows.
        self.assertAlmostEqual(
            LEAD / (7 * DAY + 7 * 7200.0), watched.chance(1), places=9)

    def test_a_daily_window_begun_before_the_record_is_not_counted(self):
        """Unwatched time is not quiet time.

        A record begun at 1:00 on the first day, a key asked for at 1:30
        every day: at 1:00 a week on, the window of 0:00 to 2:00 seven
        days back is half before the record. Counted, it would be an eighth
        period, its first hour (nobody watching) counted as quiet.
        """
        asks = [(day * DAY + 5400.0, 1) for day in range(7)]
        f = forecast.forecast(asks, 7 * DAY + 3600.0, LEAD, since=3600.0)
        self.assertEqual(7, f.windows)   # six whole days and the recent
        self.assertEqual(1, f.target)

    def test_before_a_day_is_recorded_the_record_so_far_is_the_day(self):
        """On the first day a key asked for hours ago is still wanted.

        With no whole day recorded, the daily horizon is empty: the key's
        target would follow only the last half hour, and members would go
        to whichever key was asked for last. The record so far stands for
        the usual day instead; the chance stays a share of the time.
        """
        asks = [(h * 3600.0, 1) for h in range(1, 7)] + [(7 * 3600.0, 2)]
        now = 9 * 3600.0
        f = forecast.forecast(asks, now, LEAD, since=0.0)
        self.assertEqual(2, f.target)
        self.assertEqual(1, f.windows)
        self.assertAlmostEqual(7 * LEAD / now, f.chance(1))
        self.assertAlmostEqual(LEAD / now, f.chance(2))
        # A day later the day's own windows decide: none held two.
        later = forecast.forecast(
            asks + [(DAY + h * 3600.0, 1) for h in range(1, 10)],
            DAY + 9 * 3600.0, LEAD, since=0.0)
        self.assertEqual(1, later.target)

    def test_bad_parameters(self):
        self.assertRaises(ValueError, forecast.forecast, [], 0, 0)
        self.assertRaises(ValueError, forecast.forecast, [], 0, 1, 0)


def candidate(key, target, tail, saving=60.0, project='p', max_size=100,
              lead=60.0):
    return allocation.Candidate(
        key, project, forecast.Forecast(target, tuple(tail), 10), saving,
        lead, max_size)


class AllocationTest(testcase.TestCase):

    def test_value_density(self):
        self.assertEqual(0.0, allocation.density(60.0, 0.0, 30.0))
        self.assertEqual(2.0, allocation.density(60.0, 0.5, 30.0))
        self.assertEqual(float('inf'), allocation.density(60.0, 1.0, 30.0))

    def test_a_longer_lead_time_is_no_reason_to_keep_a_member(self):
        # 'quick': a chance of 0.3 within its 20 s lead time, about an ask
        # a minute; 'slow': 0.6 within 80 s, about one every 87 s. Per lead
        # time the slow key looks likelier; per idle second the quick one
        # is asked for more often, and saves more.
        quick = candidate('quick', 1, [0.3], lead=20.0)
        slow = candidate('slow', 1, [0.6], lead=80.0)
        got = allocation.allocate([slow, quick], allocation.Budget(1, 24.0))
        self.assertEqual({'quick': 1}, got.members)

    def test_an_idle_hours_budget_caps_members_alive_at_once(self):
        budget = allocation.Budget(10, 100.0, {'p': 3}, {'q': 30.0})
        self.assertEqual(4, allocation.member_cap(budget))
        self.assertEqual(3, allocation.member_cap(budget, 'p'))
        self.assertEqual(1, allocation.member_cap(budget, 'q'))

    def test_members_go_where_they_save_the_most_per_idle_second(self):
        hot = candidate('hot', 2, [0.9, 0.8])
        cold = candidate('cold', 2, [0.3, 0.1])
        slow = candidate('slow', 1, [0.3], saving=600.0)
        got = allocation.allocate([cold, hot, slow],
                                  allocation.Budget(3, 1000.0))
        self.assertEqual({'hot': 2, 'slow': 1}, got.members)
        self.assertEqual({'cold': 2}, got.refused)
        self.assertEqual(72.0, got.idle_vm_hours)

    def test_no_budget_is_ever_exceeded(self):
        keys = [candidate('k%d' % i, 5, [0.9, 0.7, 0.5, 0.3, 0.1],
                          project='p%d' % (i % 2)) for i in range(6)]
        project_of = {c.key: c.project_id for c in keys}
        for n in (0, 1, 7, 30):
            for hours in (0.0, 50.0, 500.0, 1e6):
                budget = allocation.Budget(n, hours, {'p0': 4},
                                           {'p1': 100.0})
                got = allocation.allocate(keys, budget)
                self.assertLessEqual(got.total, budget.members)
                self.assertLessEqual(got.idle_vm_hours, hours)
                for project, cap in (('p0', 4), ('p1', 4)):
                    self.assertLessEqual(sum(
                        m for k, m in got.members.items()
                        if project_of[k] == project), cap)
                # Members a smaller allocation no longer wants are still
                # alive: nothing is made beyond the budget meanwhile.
                alive = {'k0': 3, 'k1': 2}
                made = allocation.to_create(got.members, alive, budget,
                                            project_of)
                after = dict(alive)
                for key, more in made.items():
                    after[key] = after.get(key, 0) + more
                self.assertLessEqual(sum(after.values()),
                                     max(allocation.member_cap(budget), 5))
                for project in ('p0', 'p1'):
                    before = sum(v for k, v in alive.items()
                                 if project_of[k] == project)
                    self.assertLessEqual(
                        sum(v for k, v in after.items()
                            if project_of[k] == project),
                        max(allocation.member_cap(budget, project), before))

    def test_a_key_s_bound_and_a_never_asked_member_are_respected(self):
        got = allocation.allocate(
            [candidate('a', 5, [0.9, 0.5], max_size=1),
             candidate('b', 2, [0.9, 0.0])], allocation.Budget(10, 1e6))
        self.assertEqual({'a': 1, 'b': 1}, got.members)

    def test_to_create_fills_the_largest_wants_first_within_room(self):
        budget = allocation.Budget(5, 1e6)
        self.assertEqual({'a': 3, 'b': 1}, allocation.to_create(
            {'a': 3, 'b': 2}, {'b': 1}, budget))
        self.assertEqual({}, allocation.to_create({'a': 1}, {'b': 5},
                                                  budget))


class DayShapeTest(testcase.TestCase):
    """The project's daily rhythm, and the day's idle hours spent by it."""

    def test_flat_while_no_day_is_recorded(self):
        asks = [(float(t), 1) for t in range(0, 20 * 3600, 600)]
        self.assertEqual((1.0,) * 24,
                         forecast.day_shape(asks, 20 * 3600.0))
        self.assertEqual((1.0,) * 24, forecast.day_shape([], 1e6))

    def test_the_busy_hour_of_every_day_stands_out(self):
        # Three days; every day, 10 VMs asked between 18:00 and 19:00.
        asks = [(day * DAY + 18 * 3600.0 + 360 * i, 1)
                for day in range(3) for i in range(10)]
        now = 3 * DAY + 18 * 3600.0
        shape = forecast.day_shape(asks, now, since=0.0, prior_days=0.0)
        # Now (18:00: 17:00 to 19:00 held the burst) is busy; an hour
        # before it (16:00 to 18:00), and the night, had nothing.
        self.assertEqual(0.0, shape[23])
        self.assertEqual(0.0, shape[10])
        # The rate in 17:00-19:00 (10 VMs in 2 h) against the mean
        # (30 VMs in 3 days and 18 h).
        busy = 10 / 7200.0 / (30 / now)
        self.assertAlmostEqual(busy, shape[0])
        self.assertGreater(shape[0], 1.0)
        # By default a flat day counts beside the three recorded ones.
        shape = forecast.day_shape(asks, now, since=0.0)
        self.assertAlmostEqual((3 * busy + 1.0) / 4, shape[0])
        # (16:00 to 18:00 is recorded on four days.)
        self.assertAlmostEqual(1.0 / 5, shape[23])
        # One recorded day is believed half.
        first = [(t, n) for t, n in asks if t < DAY]
        self.assertAlmostEqual(
            (10 / 7200.0 / (10 / (DAY + 18 * 3600.0)) + 1.0) / 2,
            forecast.day_shape(first, DAY + 18 * 3600.0, since=0.0)[0])

    def test_a_flat_day_holds_the_budget_s_share_all_day(self):
        budget = allocation.Budget(8, 96.0)
        densities = [5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.2, 0.1, 0.05]
        self.assertEqual(4, allocation.paced(densities, budget, (1.0,) * 24))

    def test_the_day_s_hours_go_to_the_busy_hours(self):
        budget = allocation.Budget(8, 96.0)
        densities = [5.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.2, 0.1, 0.05]
        busy = (3.0,) * 8 + (0.2,) * 16
        # Busy now: more than the flat share, never more than the members.
        held = allocation.paced(densities, budget, busy)
        self.assertGreater(held, 4)
        self.assertLessEqual(held, 8)
        # Quiet now, busy later: fewer now, the hours kept for later.
        quiet = busy[8:] + busy[:8]
        held = allocation.paced(densities, budget, quiet)
        self.assertLess(held, 4)
        # The whole day never holds more than the day's hours.
        day = sum(allocation.paced(densities, budget, busy[h:] + busy[:h])
                  for h in range(24))
        self.assertLessEqual(day, 96)
        # Nothing worth keeping: nothing kept.
        self.assertEqual(0, allocation.paced([0.0], budget, busy))
        self.assertEqual(0, allocation.paced(densities,
                                             allocation.Budget(8, 0.0), busy))

    def test_spend_room_keeps_the_day_within_budget(self):
        budget = allocation.Budget(8, 96.0)
        self.assertEqual(96 * 3600 // 600, allocation.spend_room(
            budget, 0.0, 600.0))
        self.assertEqual(2, allocation.spend_room(
            budget, 96 * 3600.0 - 1300.0, 600.0))
        self.assertEqual(0, allocation.spend_room(
            budget, 96 * 3600.0 + 5.0, 600.0))
        # A day spent in full leaves room for what leaves it meanwhile:
        # 3 members held at this time yesterday, then (at 200 s) none.
        self.assertEqual(3, allocation.spend_room(
            budget, 96 * 3600.0, 600.0, [(600.0, 1800.0)]))
        self.assertEqual(0, allocation.spend_room(
            budget, 96 * 3600.0, 600.0, [(200.0, 0.0), (600.0, 1800.0)]))

    def test_spend_room_never_lets_a_day_exceed_the_budget(self):
        # Random spends of the last day; the members the room allows for
        # the horizon, checked against every day ending within it.
        rng = random.Random(7)
        budget = allocation.Budget(20, 96.0)
        horizon = 600.0
        for _ in range(200):
            doc = demand.empty('p')
            t = 0.0
            while t < 2 * DAY:
                demand.add_spend(doc, t, rng.randrange(9))
                t += rng.choice([60.0, 300.0, 3600.0, 7200.0])
            now = t
            spent = demand.spent(doc, now)
            room = allocation.spend_room(
                budget, spent, horizon, demand.leaving(doc, now, horizon))
            if room == 0:
                continue
            demand.add_spend(doc, now, room)
            for x in range(0, int(horizon) + 1, 10):
                self.assertLessEqual(demand.spent(doc, now + x),
                                     budget.idle_vm_hours * 3600.0 + 1e-6)
            # One member more would break some day ending within it.
            doc['spend'][-1][1] = room + 1
            self.assertTrue(any(
                demand.spent(doc, now + x) > budget.idle_vm_hours * 3600.0
                for x in range(0, int(horizon) + 1, 10)))
