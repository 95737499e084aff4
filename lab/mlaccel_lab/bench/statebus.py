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

"""The state bus's reader: a full read every refresh against what changed.

Two arms of the scheduler's report cache
(:class:`~mlaccel.scheduler.hostview.HostReportCache`, its view derived on
each refresh), at the shipped ``refresh_interval``:

- **stock**, :class:`FullReadCache`: every refresh reads every report in one
  tooz ``get_members_with_capabilities`` call, as mlaccel did before it read
  incrementally;
- **mlaccel**, :class:`IncrementalCache`: the cache as shipped, reading only
  the reports announced (Redis) or revised (etcd) since its last read, and
  every report every ``FULL_READ_INTERVAL`` (300) seconds.

Both run in this process, one at a time: a measured stretch starts the
arm's cache, lets its first (full) read finish and runs over whole refresh
cycles, from the end of one refresh to the end of a later one, while this
process does nothing else, so its CPU clock is the refresh's whole cost (the
refresh thread, tooz's executor threads, the garbage collections). Another
process plays the agents (:func:`mlaccel_lab.bench.scheduler.play_agents`):
signed reports (the deployment key's HMAC with sequence numbers, as agents
sign), Redis writes announced in the change index as publishers announce
them, etcd writes in transactions of 128. Before each stretch every report is
published anew, so that all are fresh (at 1 % a second a report would
outlive ``report_max_age``), then the given share of the hosts is republished
each second, in turn. The arms alternate in an order other than the last.

1. **Refresh CPU**, percent of one core, at 0, 1 and 10 % of the reports
   changing per second, on a ``redis-server`` and on a three-member etcd
   cluster of the benchmark's own (reader on one member, agents on another).
   mlaccel's figure adds its full read every 300 s, measured as one cycle
   and spread over 300 s; the column beside it leaves it out.
2. **Scheduler CPU per request** on Redis with 1 % changing: Nova's own
   filters and weighers without a report cache (stock Nova) against Nova
   with mlaccel's plugins and the shipped cache, through
   :mod:`mlaccel_lab.bench.scheduler`'s managers and hosts. The scheduling
   thread's CPU is measured request by request, each request scheduled by
   both arms in turn (in an order other than the last), with the shipped
   cache refreshing throughout, as one scheduler process runs it; each
   arm's refresh CPU per second (from 1.) divided by the request rate is
   added; the total on etcd adds the etcd refresh's CPU to the same
   thread, whose input, the cache's view, does not depend on the backend.
   The full-read cache's figure is the same plugins' thread CPU plus its
   own refresh CPU: running it beside the shipped one would put
   a second cache's reports and garbage, which no scheduler holds, into
   every request's collections. (Stretches of one arm at a time, each with
   its own refresh thread, gave ratios that moved by several percent from
   run to run, more than the plugins cost.)
3. **Report propagation**, with 10 % changing (every host republishing
   every 10 s, the agents' default): from a report's timestamp, set by its
   publisher as it writes, to the moment a running cache holds it.
4. **Pool manager failover** on the etcd cluster: two processes each ask
   :meth:`mlaccel.pool.manager.PoolManager.is_leader` every ``[mlaccel_pool]
   interval`` with the shipped options; the leader is SIGKILLed and the
   other's first lead is timed.

The last line is ``RESULT sched_total_cpu_ratio_10k_at_10rps=<x>
idle_refresh_cpu_pct_10k=<y> report_propagation_p99_ms=<z> failover_s=<w>``:
mlaccel's, on Redis at the largest size (10,000 hosts; ``--quick``: 200),
the failover on etcd (the longest of its trials).
"""

import argparse
import gc
import multiprocessing
import os
import queue
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid

from mlaccel_lab.bench import scheduler as sched
from mlaccel_lab.testing import servers

#: Shares of the reports republished per second in the refresh's CPU.
SHARES = (0.0, 0.01, 0.1)
#: Share changing while requests are scheduled.
SCHED_SHARE = 0.01
#: Share changing while propagation is timed: each host every 10 s.
PROPAGATION_SHARE = 0.1
#: Requests a second.
RATES = (1, 10, 100)
#: The refresh thread's name (:class:`mlaccel.periodic.Periodic`).
READER_THREAD = 'mlaccel-statebus-reader'
#: Seconds any one wait may take before the run fails.
TIMEOUT = 120
#: ``refresh_interval``'s default while every refresh read every report.
OLD_REFRESH_INTERVAL = 2.0

#: What a run measures: seconds of refresh cycles per stretch, stretches
#: per arm and condition, changes timed per arm, failover trials.
FULL = dict(sizes=(1000, 10000), backends=('redis', 'etcd'), stretch=8.0,
            rounds=2, changes=100, trials=3)
QUICK = dict(sizes=(200,), backends=('redis',), stretch=1.0, rounds=1,
             changes=50, trials=1)


def _cache_classes():
    from mlaccel.scheduler import hostview
    from mlaccel.statebus import drivers

    class Tracked(hostview.HostReportCache):
        """Records, while ``delays`` is a list, each new report's age.

        The age is taken when the refresh that brought the report has
        swapped it in, from the timestamp its publisher wrote.
        """

        delays = None

        def _load(self, members, now, partial=False):
            held = self.current().reports
            super()._load(members, now, partial)
            if self.delays is not None:
                at = time.time()
                self.delays.extend(
                    at - report.timestamp
                    for host, report in self.current().reports.items()
                    if held.get(host) is not report)

    class IncrementalCache(Tracked):
        """mlaccel's cache as shipped: a refresh reads what changed."""

    class FullReadCache(Tracked):
        """The cache as before incremental reads: every report, each time.

        Its driver is the one that knows no change, whatever the backend:
        a refresh is tooz's ``get_members_with_capabilities`` alone.
        """

        FULL_READ_INTERVAL = 0

        @property
        def _changes(self):
            return vars(self)['_changes']

        @_changes.setter
        def _changes(self, driver):
            vars(self)['_changes'] = None if driver is None else \
                drivers.Changes(driver.coord, driver.group)

    return {'stock': FullReadCache, 'mlaccel': IncrementalCache}


class Orders:
    """Orders of the arms, each other than the one before."""

    def __init__(self, rng):
        self.rng = rng
        self.drawn = []

    def __call__(self, arms):
        arms = list(arms)
        self.rng.shuffle(arms)
        while len(arms) > 1 and self.drawn and arms == self.drawn[-1]:
            self.rng.shuffle(arms)
        self.drawn.append(arms)
        return arms

    def changing(self):
        """Whether no two orders in a row were the same."""
        return all(a != b for a, b in zip(self.drawn, self.drawn[1:]))


def reader_threads():
    """How many report caches' refresh threads are running."""
    return sum(t.name == READER_THREAD and t.is_alive()
               for t in threading.enumerate())


def cycles(cache, count, until=None):
    """This process's CPU and wall seconds over ``count`` refresh cycles.

    Call it just after a refresh ended. Fewer cycles, but at least one,
    if the monotonic clock passes ``until``. Also returns how many
    refreshes read everything and how many only what changed.
    """
    reads = cache.full_reads, cache.partial_reads
    cpu, wall = time.process_time(), time.monotonic()
    for done in range(count):
        if done and until is not None and time.monotonic() > until:
            break
        if not cache.wait_for_refresh(1, TIMEOUT):
            raise RuntimeError('the refresh thread stalled')
    return (time.process_time() - cpu, time.monotonic() - wall,
            (cache.full_reads - reads[0], cache.partial_reads - reads[1]))


def quantile(values, q):
    """The ``q``-th percentile of ``values`` (inclusive method)."""
    return statistics.quantiles(values, n=100, method='inclusive')[q - 1]


class Bench:
    """Everything one run holds: servers, agents, caches, findings."""

    def __init__(self, conf, profile, rng, tmp):
        self.conf = conf
        self.profile = profile
        self.rng = rng
        self.orders = Orders(rng)
        self.opts = conf.mlaccel_statebus
        self.classes = _cache_classes()
        self.key_file = os.path.join(tmp, 'deployment.key')
        from mlaccel.statebus import keys
        keys.write_key(self.key_file, keys.generate())
        conf.set_override('deployment_key_file', self.key_file,
                          'mlaccel_statebus')
        self.servers = []
        self.urls = {}
        self.faults = []
        self.refresh = {}     # (backend, size, share, arm) -> figures
        self.delays = {}      # (backend, size, arm) -> [seconds]
        self.fresh = []       # hosts with a fresh report / hosts, checked
        # (size, arm) -> [the scheduling thread's CPU ms per request, of
        # each round]; size -> (rounds, requests per round).
        self.sched, self.sched_rounds = {}, {}
        self.published = None

    # -- servers and agents ---------------------------------------------

    def start_servers(self):
        redis = sched.start_server(servers.RedisServer())
        self.servers.append(redis)
        url = redis.url + sched.REDIS_OPTIONS
        self.urls['redis'] = (url, url)
        self.etcd = sched.start_server(servers.EtcdCluster())
        self.servers.append(self.etcd)
        # The schedulers read through one member, the agents write
        # through another.
        self.urls['etcd'] = (self.etcd.url(0), self.etcd.url(1))

    def stop(self):
        for server in reversed(self.servers):
            server.cleanUp()
        self.conf.clear_override('deployment_key_file', 'mlaccel_statebus')
        self.conf.clear_override('backend_url', 'mlaccel_statebus')

    def scene(self, backend, hosts, fields):
        """Agents and both arms' caches for ``hosts`` on ``backend``."""
        read, write = self.urls[backend]
        self.conf.set_override('backend_url', read, 'mlaccel_statebus')
        group = '%s.bench-%d' % (self.opts.group, len(hosts))
        agents = sched.Agents(write, group.encode(), fields, 0.0,
                              self.key_file)
        caches = {arm: cls(self.conf, group=group)
                  for arm, cls in self.classes.items()}
        return agents, caches

    # -- one stretch ----------------------------------------------------

    def started(self, agents, caches, hosts):
        """``caches`` running, every report fresh in them, just refreshed.

        ``caches``: one cache, or a list of them.
        """
        caches = caches if isinstance(caches, list) else [caches]
        self.published = time.monotonic()
        agents.publish_all()
        if reader_threads():
            raise RuntimeError('another report cache is running')
        for cache in caches:
            cache.start()
        self._hold(caches, hosts, 1)
        if reader_threads() != len(caches):
            raise RuntimeError('%d refresh threads run, not %d'
                               % (reader_threads(), len(caches)))
        return caches[0]

    def republished(self, agents, caches, hosts):
        """Every report published anew, and held by each of ``caches``."""
        self.published = time.monotonic()
        agents.publish_all()
        # The refresh under way may have begun before the writes.
        self._hold(caches, hosts, 2)

    def _hold(self, caches, hosts, refreshes):
        """Each of ``caches`` refreshed ``refreshes`` more times, all fresh."""
        for cache in caches:
            if not cache.wait_for_refresh(refreshes, TIMEOUT):
                raise RuntimeError('the refresh thread stalled')
            sched.wait_until_fresh(cache, hosts, TIMEOUT)
            self.fresh.append((len(hosts), len(hosts)))

    def fresh_until(self):
        """When the reports last published are half ``report_max_age`` old.

        (Monotonic.) Stretches end by then, so that every report is still
        fresh at their end, however slow a loaded machine makes them.
        """
        return self.published + self.opts.report_max_age / 2

    def still_fresh(self, cache, hosts, what):
        """Record a fault unless every report is still fresh in ``cache``."""
        fresh = sched.fresh_count(cache, hosts)
        self.fresh.append((fresh, len(hosts)))
        if fresh < len(hosts):
            self.faults.append('%s: %d of %d reports fresh at the end'
                               % (what, fresh, len(hosts)))

    def stopped(self, cache, hosts, what):
        """Check that every report was still fresh; stop ``cache``."""
        self.still_fresh(cache, hosts, what)
        cache.stop()

    def expect(self, reads, arm, count, what, full=False):
        """Record a fault unless ``arm`` read as it should have."""
        want = (count, 0) if arm == 'stock' or full else (0, count)
        if reads != want:
            self.faults.append('%s: %d full and %d partial reads, expected '
                               '%d and %d' % ((what,) + reads + want))

    # -- 1. refresh CPU ---------------------------------------------------

    def refresh_cpu(self, backend, agents, caches, hosts):
        count = max(1, round(self.profile['stretch'] /
                             self.opts.refresh_interval))
        for share in SHARES:
            agents.set_share(share)
            for _ in range(self.profile['rounds']):
                for arm in self.orders(caches):
                    what = '%s %d hosts %g %% %s' % (
                        backend, len(hosts), share * 100, arm)
                    cache = self.started(agents, caches[arm], hosts)
                    cpu, wall, reads = cycles(cache, count,
                                              self.fresh_until())
                    self.expect(reads, arm, sum(reads), what)
                    got = self.refresh.setdefault(
                        (backend, len(hosts), share, arm),
                        dict(cpu=0.0, wall=0.0, cycles=0, full=[]))
                    got['cpu'] += cpu
                    got['wall'] += wall
                    got['cycles'] += sum(reads)
                    if arm == 'mlaccel':
                        # One full read, as every FULL_READ_INTERVAL.
                        cache.FULL_READ_INTERVAL = 0
                        cpu, _, reads = cycles(cache, 1)
                        del cache.FULL_READ_INTERVAL
                        self.expect(reads, arm, 1, what + ' full', True)
                        got['full'].append(cpu)
                    self.stopped(cache, hosts, what)

    def cpu_per_second(self, backend, size, share, arm, amortized=True,
                       interval=None):
        """Seconds of CPU per second of an arm's refreshes.

        With ``interval``, as if they came that many seconds apart.
        """
        got = self.refresh[backend, size, share, arm]
        cycle = got['cpu'] / got['cycles']
        rate = got['cpu'] / got['wall'] if interval is None else \
            cycle / (interval + self.refresh_seconds(backend, size, share,
                                                     arm))
        if got['full'] and amortized:
            rate += (statistics.mean(got['full']) - cycle) / \
                self.classes['mlaccel'].FULL_READ_INTERVAL
        return rate

    def refresh_seconds(self, backend, size, share, arm):
        """An arm's mean refresh time: its cycles' less the interval."""
        got = self.refresh[backend, size, share, arm]
        return got['wall'] / got['cycles'] - self.opts.refresh_interval

    # -- 2. scheduler CPU per request -----------------------------------

    def scheduling(self, agents, caches, hosts, images, managers):
        """The scheduling thread's CPU of each arm, request by request.

        The shipped cache refreshes throughout, so that whatever its
        refresh thread does to the scheduling thread's clock, both arms'
        requests share it; each request is scheduled by both arms in turn,
        in an order other than the last, on the same spec.
        """
        from mlaccel.scheduler import hostview
        from mlaccel.statebus import reader

        size = len(hosts)
        agents.set_share(SCHED_SHARE)
        requests = 3 if self.profile is QUICK else max(
            15, min(50, 50000 // size))
        rounds = 1 if self.profile is QUICK else 4
        self.sched_rounds[size] = (rounds, requests)
        running = [caches['mlaccel']]
        # Each arm's scheduler manager: Nova's own, and Nova's with
        # mlaccel's plugins.
        arms = {'stock': managers[0], 'mlaccel': managers[1]}
        self.started(agents, running, hosts)
        # The cache the plugins read (tests swap it so too).
        reader._caches[hostview.HostReportCache] = (os.getpid(),
                                                    caches['mlaccel'])
        try:
            for number in range(rounds):
                spent = {arm: [] for arm in arms}
                for i in range(requests + 1):
                    if time.monotonic() >= self.fresh_until():
                        self.republished(agents, running, hosts)
                    image = self.rng.choice(images)
                    for arm in self.orders(arms):
                        manager = arms[arm]
                        sched.heartbeat(hosts)
                        cpu, _, kept = sched.schedule_once(
                            manager, hosts, sched.make_spec(image), False)
                        if kept != size:
                            self.faults.append('%d hosts %s: %d of %d hosts '
                                               'kept' % (size, arm, kept,
                                                         size))
                        if i:   # the first: lazy imports and first uses
                            spent[arm].append(cpu * 1000)
                for arm, ms in spent.items():
                    self.sched.setdefault((size, arm), []).append(ms)
                for cache in running:
                    self.still_fresh(cache, hosts, 'scheduling %d hosts, '
                                     'round %d' % (size, number + 1))
        finally:
            for cache in running:
                cache.stop()
            reader._caches.pop(hostview.HostReportCache, None)

    def totals(self, size, rate, arm, backend='redis'):
        """An arm's CPU ms per request at ``rate``, of each round.

        The scheduling thread's mean over the round's requests (at every
        rate: it does not depend on it), plus the refresh's CPU per second
        on ``backend`` (the same share changing) over the rate.
        ``full-read`` is the plugins' thread (mlaccel's) with the full-read
        cache's refresh. The thread is measured on Redis: what it reads,
        the cache's view, is the same on every backend.
        """
        refresh = 0.0 if arm == 'stock' else self.cpu_per_second(
            backend, size, SCHED_SHARE,
            'mlaccel' if arm == 'mlaccel' else 'stock')
        thread = 'stock' if arm == 'stock' else 'mlaccel'
        return [statistics.mean(spent) + refresh / rate * 1000
                for spent in self.sched[size, thread]]

    def sched_ratio(self, size, rate, arm='mlaccel', backend='redis'):
        """Median over the rounds of ``arm``'s total over stock's."""
        return statistics.median(
            a / s for a, s in zip(self.totals(size, rate, arm, backend),
                                  self.totals(size, rate, 'stock')))

    # -- 3. propagation -------------------------------------------------

    def propagation(self, backend, agents, caches, hosts):
        agents.set_share(PROPAGATION_SHARE)
        for _ in range(self.profile['rounds']):
            for arm in self.orders(caches):
                what = 'propagation %s %d hosts %s' % (backend, len(hosts),
                                                       arm)
                cache = self.started(agents, caches[arm], hosts)
                delays = cache.delays = []
                count = 0
                while count < 2 or len(delays) < self.profile['changes']:
                    if count and time.monotonic() > self.fresh_until():
                        break
                    _, _, reads = cycles(cache, 1)
                    self.expect(reads, arm, 1, what)
                    count += 1
                cache.delays = None
                self.delays.setdefault((backend, len(hosts), arm),
                                       []).extend(delays)
                self.stopped(cache, hosts, what)


def pool_manager(url, name, events):
    """A pool manager's leadership loop, in a process of its own.

    Puts ``(name, leads, time)`` on ``events`` at first and whenever
    :meth:`~mlaccel.pool.manager.PoolManager.is_leader` answers otherwise.
    """
    from oslo_config import cfg

    from mlaccel import conf as mlaccel_conf
    from mlaccel.pool import manager
    from mlaccel.pool import store

    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    conf([], project='mlaccel', default_config_files=[],
         default_config_dirs=[])
    conf.set_override('backend_url', url, 'mlaccel_statebus')
    pm = manager.PoolManager(None, None, conf,
                             leader_lock=store.BusLocks(conf))
    leads = None
    while True:
        now = pm.is_leader()
        if now != leads:
            events.put((name, now, time.time()))
            leads = now
        time.sleep(conf.mlaccel_pool.interval)


class PoolManagers:
    """Two :func:`pool_manager` processes on the etcd cluster.

    :ivar taken: how many times one of them took the lead.
    """

    def __init__(self, etcd, interval, rng):
        self.ctx = multiprocessing.get_context('spawn')
        self.events = self.ctx.Queue()
        self.urls = [etcd.url(1), etcd.url(2)]
        self.interval = interval
        self.rng = rng
        self.processes = {}
        self.leads = {}
        self.taken = 0
        for _ in self.urls:
            self._start()

    def _start(self):
        name = 'pm%d' % len(self.leads)
        self.leads[name] = None
        self.processes[name] = self.ctx.Process(
            target=pool_manager, daemon=True,
            args=(self.urls[len(self.leads) % 2], name, self.events))
        self.processes[name].start()

    def _record(self, event):
        name, leads, at = event
        self.leads[name] = (leads, at)
        self.taken += leads

    def _until(self, predicate):
        deadline = time.monotonic() + TIMEOUT
        while not predicate():
            self._record(self.events.get(
                timeout=max(0.1, deadline - time.monotonic())))

    def _drain(self):
        while True:
            try:
                self._record(self.events.get_nowait())
            except queue.Empty:
                return

    def _alive(self):
        return [n for n, p in self.processes.items() if p.is_alive()]

    def trial(self):
        """Seconds from SIGKILL of the leader to the other's lead.

        The leader is killed at a random moment of the other's round.
        """
        self._until(lambda: all(self.leads[n] is not None
                                for n in self._alive()))
        time.sleep(self.rng.uniform(0, self.interval))
        self._drain()
        leaders = [n for n in self._alive() if self.leads[n][0]]
        if len(leaders) != 1:
            raise RuntimeError('%d pool managers lead' % len(leaders))
        leader, = leaders
        other, = set(self._alive()) - {leader}
        killed = time.time()
        self.processes[leader].kill()
        self.processes[leader].join()
        self._until(lambda: self.leads[other][0])
        failover = self.leads[other][1] - killed
        self._start()
        return failover

    def stop(self):
        for process in self.processes.values():
            process.kill()
            process.join()


def _pct(seconds):
    return '%.2f' % (seconds * 100)


def print_refresh(bench, sizes, backends, interval):
    print('\n1. Refresh CPU, %% of one core (this process\'s CPU over whole '
          'refresh cycles at refresh_interval=%g s)' % interval)
    print('%-6s %6s %8s %8s %8s %8s %10s %7s %10s %9s %9s' % (
        'bus', 'hosts', 'changing', 'stock', 'stock 2s', 'mlaccel',
        'w/o 300 s', 'ratio', 'full read', 'stock ms', 'mlacc ms'))
    for backend in backends:
        for size in sizes:
            for share in SHARES:
                key = (backend, size, share)
                stock = bench.cpu_per_second(*key, 'stock')
                mlaccel = bench.cpu_per_second(*key, 'mlaccel')
                print('%-6s %6d %7g%% %8s %8s %8s %10s %7.1f %8.1fms %9.1f '
                      '%9.1f' % (
                          backend, size, share * 100, _pct(stock),
                          _pct(bench.cpu_per_second(
                              *key, 'stock', interval=OLD_REFRESH_INTERVAL)),
                          _pct(mlaccel), _pct(bench.cpu_per_second(
                              *key, 'mlaccel', amortized=False)),
                          stock / mlaccel if mlaccel else float('inf'),
                          statistics.mean(bench.refresh[
                              key + ('mlaccel',)]['full']) * 1000,
                          bench.refresh_seconds(*key, 'stock') * 1000,
                          bench.refresh_seconds(*key, 'mlaccel') * 1000))
    print('stock: every refresh reads every report; stock 2s: the same '
          'refreshes %g s apart (the default of those releases); mlaccel: '
          'as shipped, its full read every 300 s spread over them (w/o '
          '300 s: without it); ratio: stock/mlaccel; full read: CPU of one '
          'of mlaccel\'s full reads; stock ms, mlacc ms: mean wall time of '
          'a refresh (a cycle less the interval)' % OLD_REFRESH_INTERVAL)


ARMS = ('stock', 'mlaccel', 'full-read')
#: The arms whose requests are scheduled.
SCHED_ARMS = ('stock', 'mlaccel')


def print_sched(bench, sizes, backends):
    print('\n2. Scheduler process CPU per request, %g %% of reports '
          'changing a second (ms; the scheduling thread\'s CPU + the '
          'refresh\'s CPU per second / rate)' % (SCHED_SHARE * 100))
    etcd = 'etcd' in backends
    print('%6s %5s %9s %9s %7s %10s %7s' % (
        'hosts', 'rps', 'stock', 'mlaccel', 'ratio', 'full-read', 'ratio')
        + (' %9s %7s' % ('on etcd', 'ratio') if etcd else ''))
    for size in sizes:
        for rate in RATES:
            ms = {arm: statistics.mean(bench.totals(size, rate, arm))
                  for arm in ARMS}
            line = '%6d %5d %9.2f %9.2f %7.3f %10.2f %7.3f' % (
                size, rate, ms['stock'], ms['mlaccel'],
                bench.sched_ratio(size, rate), ms['full-read'],
                bench.sched_ratio(size, rate, 'full-read'))
            if etcd:
                line += ' %9.2f %7.3f' % (
                    statistics.mean(bench.totals(size, rate, 'mlaccel',
                                                 'etcd')),
                    bench.sched_ratio(size, rate, 'mlaccel', 'etcd'))
            print(line)
    for size, (rounds, requests) in bench.sched_rounds.items():
        print('%d hosts: %d rounds of %d requests, each scheduled by both '
              'arms in turn, after an untimed one; the scheduling '
              'thread\'s CPU per request: %s; mlaccel/stock per round: %s' % (
                  size, rounds, requests, ', '.join(
                      '%s %.2f ms' % (arm, statistics.mean(
                          ms for spent in bench.sched[size, arm]
                          for ms in spent)) for arm in SCHED_ARMS),
                  ' '.join('%.3f' % (statistics.mean(m) / statistics.mean(s))
                           for m, s in zip(bench.sched[size, 'mlaccel'],
                                           bench.sched[size, 'stock']))))
    print('stock: Nova\'s filters and weighers, no report cache; mlaccel: '
          'with BuildSlotFilter, LifecycleWeigher and the shipped cache; '
          'full-read: the same plugins\' thread with the full-read cache\'s '
          'refresh; the shipped cache refreshes throughout, each arm\'s '
          'own refresh CPU (from 1.) is added; ratio: median over the '
          'rounds of the arm\'s total over stock\'s; no garbage collection '
          'forced; on etcd: mlaccel\'s thread, measured on Redis, with the '
          'shipped cache\'s refresh CPU on etcd')


def print_propagation(bench, sizes, backends):
    print('\n3. Report propagation, %g %% changing a second: publisher\'s '
          'timestamp to the running cache holding the report (ms)'
          % (PROPAGATION_SHARE * 100))
    print('%-6s %6s %-8s %8s %8s %8s' % ('bus', 'hosts', 'arm', 'changes',
                                         'p50', 'p99'))
    for backend in backends:
        for size in sizes:
            for arm in ('stock', 'mlaccel'):
                delays = bench.delays[backend, size, arm]
                print('%-6s %6d %-8s %8d %8.0f %8.0f' % (
                    backend, size, arm, len(delays),
                    quantile(delays, 50) * 1000, quantile(delays, 99) * 1000))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m mlaccel_lab.bench statebus', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true',
                        help='200 hosts, Redis only, one short stretch per '
                             'arm and condition: a smoke run')
    parser.add_argument('--sizes', default=None,
                        help='host counts (default: 1000,10000; 200 with '
                             '--quick)')
    parser.add_argument('--backends', default=None,
                        help='state buses of 1. and 3. (default: redis,etcd; '
                             'redis with --quick); 2. runs on redis, which '
                             'is always included, and the failover on etcd')
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)
    profile = QUICK if args.quick else FULL
    sizes = [int(s) for s in args.sizes.split(',')] if args.sizes \
        else list(profile['sizes'])
    backends = profile['backends']
    if args.backends:
        chosen = set(args.backends.split(',')) | {'redis'}
        if not chosen <= set(FULL['backends']):
            parser.error('--backends: one or more of %s'
                         % ', '.join(FULL['backends']))
        backends = [b for b in FULL['backends'] if b in chosen]
    started = time.monotonic()

    conf = sched.nova_conf()
    from mlaccel.conf import pool as pool_conf
    from mlaccel.conf import statebus as statebus_conf

    rng = random.Random(args.seed)
    images = [str(uuid.uuid4()) for _ in range(200)]
    managers = sched.build_managers(conf)
    tmp = tempfile.mkdtemp(prefix='mlaccel-bench-statebus-')
    bench = Bench(conf, profile, rng, tmp)
    leaders = None
    try:
        bench.start_servers()
        # Started now, so that they have settled who leads by the end.
        leaders = PoolManagers(bench.etcd, conf.mlaccel_pool.interval, rng)
        for size in sizes:
            hosts = sched.make_hosts(size, images, 20, rng)
            fields = sched.report_fields(hosts, images, rng)
            # The hosts and their instances, which no arm makes, out of
            # the collector's full collections.
            gc.collect()
            gc.freeze()
            for backend in backends:
                agents, caches = bench.scene(backend, hosts, fields)
                try:
                    bench.refresh_cpu(backend, agents, caches, hosts)
                    if backend == 'redis':
                        bench.scheduling(agents, caches, hosts, images,
                                         managers)
                    bench.propagation(backend, agents, caches, hosts)
                finally:
                    agents.stop()
                    for cache in caches.values():
                        cache.stop()
                print('%s, %d hosts: done at %.0f s' % (
                    backend, size, time.monotonic() - started))
                sys.stdout.flush()
            gc.unfreeze()
        failovers = [leaders.trial() for _ in range(profile['trials'])]
    finally:
        if leaders is not None:
            leaders.stop()
        bench.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    interval = bench.opts.refresh_interval
    print_refresh(bench, sizes, backends, interval)
    print_sched(bench, sizes, backends)
    print_propagation(bench, sizes, backends)
    pool = conf.mlaccel_pool
    lease = getattr(pool, 'leader_lease', None)
    print('\n4. Pool manager failover on the etcd cluster: %s s (trials; '
          'SIGKILL of the leader, at a random moment of the other\'s '
          'round, to the other\'s lead); interval=%g s, leader_lease=%s; '
          'the lead changed hands %d times without a kill'
          % (', '.join('%.1f' % f for f in failovers), pool.interval, lease,
             leaders.taken - 1 - len(failovers)))

    defaults = {
        'refresh_interval': (interval, statebus_conf.OPTS),
        'report_max_age': (bench.opts.report_max_age, statebus_conf.OPTS),
        'interval': (pool.interval, pool_conf.OPTS)}
    if lease is not None:
        defaults['leader_lease'] = (lease, pool_conf.OPTS)
    tuned = [name for name, (value, opts) in defaults.items()
             if value != sched.option_default(opts, name)]
    largest = sizes[-1]
    fresh = min(f / n for f, n in bench.fresh)
    load = os.getloadavg()
    print('\npreconditions: every report fresh at the start and the end of '
          'every stretch (%d checks, fewest %.1f %%); exactly one refresh '
          'thread running in every stretch; arms in an '
          'order other than the last, %d times (%s); options at their '
          'defaults (%s); signed reports; %d hosts for the RESULT; %.0f s; '
          'load average %.2f %.2f %.2f on %d CPUs'
          % (len(bench.fresh), fresh * 100, len(bench.orders.drawn),
             'changing' if bench.orders.changing() else 'NOT CHANGING',
             'all' if not tuned else 'NOT: ' + ', '.join(tuned), largest,
             time.monotonic() - started, load[0], load[1], load[2],
             os.cpu_count()))
    for fault in bench.faults:
        print('FAULT: %s' % fault)
    status = 0
    if bench.faults or fresh < 1 or tuned or not bench.orders.changing():
        print('FAILED: a precondition did not hold', file=sys.stderr)
        status = 1
    print('The RESULT line: mlaccel\'s figures, on Redis at %d hosts; the '
          'failover on etcd, the longest of %d trials'
          % (largest, len(failovers)))
    print('RESULT sched_total_cpu_ratio_10k_at_10rps=%.3f '
          'idle_refresh_cpu_pct_10k=%.3f report_propagation_p99_ms=%.0f '
          'failover_s=%.1f' % (
              bench.sched_ratio(largest, 10),
              bench.cpu_per_second('redis', largest, 0.0, 'mlaccel') * 100,
              quantile(bench.delays['redis', largest, 'mlaccel'], 99) * 1000,
              max(failovers)))
    return status


if __name__ == '__main__':
    sys.exit(main())
