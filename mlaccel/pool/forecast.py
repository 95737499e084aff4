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

"""How many VMs of one key will be asked for within a refill's lead time.

Little's law (:mod:`mlaccel.pool.sizing`) keeps the *mean* demand over the
lead time warm; ML launches come in bursts, so a pool sized so is empty at
the start of each burst and refills after it has passed. The forecast
instead looks at the demand over one lead time, from the recorded asks
(:mod:`mlaccel.pool.demand`), at two horizons:

- *recent*: the last ``recent`` seconds (a burst going on now);
- *daily*: for each of the last ``days`` days, the ``daily_span`` either
  side of the same time of day (bursts that recur: a team's morning runs).

The number to keep warm is the larger of the recent peak (the most VMs
asked for in one lead time of the recent horizon) and the ``quantile``
(by default the 90th percentile) of the daily peaks: enough for the burst
going on, and for nine days in ten of the usual one. A daily window
counts only if the record holds it whole; until one does, the record so
far stands for the usual day.

The budget's allocation (:mod:`mlaccel.pool.allocation`) needs the chance
that an m-th warm member is asked for within a lead time around now: the
share of the observed time at which the next lead time held at least m
asked VMs. Three horizons are pooled, each second of them counting once:
the recent one, the daily one's windows, and the *week*, all the recorded
time of the last ``days`` days (the windows of the same time of day, inside
the week, so count twice). A key asked for once an hour has about a lead
time in an hour of chance, however many days it was asked for; a peak
alone would say "every day". Pooled, not the largest of their shares: the
larger of two estimates is biased up, most for the noisier one. A key asked
for twice a day whose last ask was ten minutes ago had a recent share of a
lead time in half an hour, as likely as a key asked for every quarter of an
hour, and took members from the keys asked for all day. The week is there
for the same reason: the rates of ML launches per key are a few an hour, a
couple of hours of daily windows hold a handful of asks, and members chased
whichever key was asked for last (measured with ``python -m mlaccel_lab.bench
pools-demand``, on the shipped stream and on the trace itself: see the
pools guide). The observed time runs from when the project's demand began
to be recorded (``since``), not from the key's own first ask: the days
before it, the key was watched and not asked for. A burst going on still
counts: its asks raise the key's target at once, and its share of the
observed time. Simple on purpose: measured shares of time, no fitted model
to go wrong on a new key; a key with no recorded asks forecasts nothing.

When in the day to spend a budget of idle VM-hours a day is a question of
the whole project, not of a key: :func:`day_shape` says how busy each of
the next 24 hours was on the recorded days against the record's mean, from
every key's asks together (a few hundred VMs a day where one key has a
handful), a flat day counting beside them as one more (the rhythm of one
recorded day is believed half). Keys are taken to share the project's
daily rhythm: a member's value in an hour is its key's value times the
hour's shape.
"""

import bisect
import collections
import dataclasses
import math

DAY = 86400.0


@dataclasses.dataclass(frozen=True)
class Forecast:
    """The demand of one key over one lead time.

    :ivar target: the VMs to keep warm.
    :ivar tail: ``tail[m - 1]`` is the chance that at least ``m`` VMs are
        asked for within a lead time around now, for ``m`` up to the
        largest peak seen: the share of the horizons' observed time.
    :ivar windows: how many periods the figures rest on (the days of the
        daily horizon and the recent one).
    """

    target: int
    tail: tuple
    windows: int

    def chance(self, m):
        """The chance that an ``m``-th warm member is asked for."""
        return self.tail[m - 1] if 0 < m <= len(self.tail) else 0.0


def window_counts(asks, starts, lead):
    """VMs asked for in ``[start, start + lead)`` for each of ``starts``.

    :param asks: ``(time, vms)`` pairs sorted by time.
    """
    times = [t for t, _ in asks]
    cumulative = [0]
    for _, vms in asks:
        cumulative.append(cumulative[-1] + vms)
    counts = []
    for start in starts:
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_left(times, start + lead)
        counts.append(cumulative[hi] - cumulative[lo])
    return counts


def quantile(counts, q):
    """The ``q`` quantile (nearest rank) of ``counts``; 0 for none."""
    if not counts:
        return 0
    ordered = sorted(counts)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def peak(asks, begin, end, lead):
    """The most VMs asked for in one ``lead`` window inside [begin, end).

    :param asks: ``(time, vms)`` pairs sorted by time.
    """
    inside = asks[bisect.bisect_left(asks, (begin, -math.inf)):
                  bisect.bisect_left(asks, (end, -math.inf))]
    # The largest window starts at one of the asks.
    return max(window_counts(inside, [t for t, _ in inside], lead),
               default=0)


def coverage(asks, begin, end, lead):
    """``{VMs: seconds}``: time in [begin, end) a lead time held so many.

    For each VM count, how long in [begin, end) the next ``lead`` seconds
    held that many asked VMs.

    :param asks: ``(time, vms)`` pairs sorted by time.
    """
    events = []
    # Only the asks in (begin, end + lead) are in a window that starts in
    # [begin, end).
    for t, n in asks[bisect.bisect_right(asks, (begin, math.inf)):
                     bisect.bisect_left(asks, (end + lead, -math.inf))]:
        # A window [start, start + lead) holds t for start in (t - lead, t].
        first, last = max(begin, t - lead), min(end, t)
        if first < last:
            events += [(first, n), (last, -n)]
    events.sort()
    seconds = collections.Counter()
    held, since = 0, begin
    for at, change in events:
        seconds[held] += at - since
        held, since = held + change, at
    seconds[held] += end - since
    return seconds


def share_at_least(seconds, top):
    """``(share of the time at least 1 VM, at least 2, ... top)``."""
    total = sum(seconds.values())
    if total <= 0:
        return (0.0,) * top
    return tuple(sum(s for held, s in seconds.items() if held >= m) / total
                 for m in range(1, top + 1))


def day_shape(asks, now, hours=24, days=7, span=3600.0, since=None,
              prior_days=1.0):
    """How busy each of the next ``hours`` hours is, against the mean.

    ``shape[i]`` is the rate of VMs asked for within ``span`` seconds of the
    time of day of ``now + i`` hours, on the last ``days`` days the record
    covers whole, over the record's mean rate. A flat day (every hour 1.0:
    nothing known of the rhythm) counts beside them as ``prior_days``
    recorded days: one day's two-hour window holds a handful of asks, too
    few to pace the day's budget by alone. While no day is recorded, the
    shape is flat.

    :param asks: ``(time, vms)`` pairs of every key of the project.
    :param since: when the demand began to be recorded; None: the oldest
        ask.
    """
    asks = sorted((t, n) for t, n in asks if t <= now)
    if not asks:
        return (1.0,) * hours
    since = asks[0][0] if since is None else min(since, asks[0][0])
    if now - since <= 0:
        return (1.0,) * hours
    mean = sum(n for _, n in asks) / (now - since)
    starts = [[s for s in (now + hour * 3600.0 - day * DAY - span
                           for day in range(1, days + 1))
               if s >= since and s + 2 * span <= now]
              for hour in range(hours)]
    counts = iter(window_counts(asks, [s for own in starts for s in own],
                                2 * span))
    shape = []
    for own in starts:
        # Each recorded day's rate over the mean, and the flat day's.
        asked = sum(next(counts) for _ in own) / (2 * span) / mean
        shape.append((asked + prior_days) / (len(own) + prior_days)
                     if own else 1.0)
    return tuple(shape)


def forecast(asks, now, lead, quantile_=0.9, recent=1800.0, days=7,
             daily_span=3600.0, since=None):
    """The :class:`Forecast` of one key from its ``(time, vms)`` asks.

    :param lead: the refill lead time (create request to a warm member),
        in seconds.
    :param recent: seconds of the recent horizon.
    :param days: days of the daily horizon.
    :param daily_span: seconds either side of the same time of day that
        count as it.
    :param since: when the demand began to be recorded (the oldest ask of
        any key kept); None: the key's own first ask.
    """
    if lead <= 0:
        raise ValueError('lead time must be positive, got %r' % (lead,))
    if not 0 < quantile_ <= 1:
        raise ValueError('quantile must be in (0, 1], got %r' % (quantile_,))
    asks = sorted((t, n) for t, n in asks if t <= now)
    if not asks:
        return Forecast(0, (), 0)
    since = asks[0][0] if since is None else min(since, asks[0][0])
    recent_peak = peak(asks, now - recent, now + 1e-9, lead)
    # Only the windows the record holds whole: a window begun before it
    # would count unwatched time as quiet.
    daily = [peak(asks, now - day * DAY - daily_span,
                  now - day * DAY + daily_span, lead)
             for day in range(1, days + 1)
             if now - day * DAY - daily_span >= since]
    # Before a day is recorded, the record so far stands for the usual
    # day: without it a key not asked for in the last half hour would
    # forecast nothing, and members would chase the key asked for last.
    usual = daily or [peak(asks, since, now + 1e-9, lead)]
    target = max(recent_peak, quantile(usual, quantile_))
    top = max(usual + [recent_peak])
    # Every observed second of each horizon counts once (not the larger of
    # their shares: see above).
    seconds = coverage(asks, now - recent, now, lead)
    for day in range(1, len(daily) + 1):
        seconds.update(coverage(asks, now - day * DAY - daily_span,
                                now - day * DAY + daily_span, lead))
    week = max(since, now - days * DAY)
    if week < now - recent:
        seconds.update(coverage(asks, week, now - recent, lead))
    return Forecast(target, share_at_least(seconds, top), len(daily) + 1)
