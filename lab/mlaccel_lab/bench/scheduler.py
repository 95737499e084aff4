# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Scheduler overhead: stock filters and weighers against stock + mlaccel.

Two real ``nova.scheduler.host_manager.HostManager`` objects are built from
configuration alone, one with Nova's defaults and one with the nova.conf
lines of mlaccel's README, and schedule the same requests over the same
hosts (real ``HostState`` objects filled in memory, each carrying full
instance objects). The two arms run interleaved, in a random order each
round, so that machine noise hits both alike; each request starts after a
garbage collection (in both arms, the collector staying on while it runs;
the hosts, made once, are frozen out of it) and is timed on the scheduling
thread's CPU clock. The ratio is the
median over the rounds of each round's mlaccel/stock ratio (a paired
comparison), printed with its interquartile range.

The reports come as in production: a ``redis-server`` of the benchmark's
own (in a temporary directory, the only place anything is written) is the
state bus; a second process plays every host's agent and republishes each
report with a fresh timestamp every ``--publish-interval`` seconds,
announcing each write in the bus's change index as agents do; the
scheduler's report cache reads them with its real background thread at its
default ``refresh_interval``, during the timing. Before and after each round
the hosts with a fresh report are counted: the run fails unless every host
had one in every round. The refreshes' own duration is reported apart.
"""

import argparse
import gc
import itertools
import multiprocessing
import os
import random
import statistics
import sys
import time
import uuid

from oslo_config import cfg

from mlaccel.statebus import drivers
from mlaccel_lab.testing import servers

NOVA_FILTERS = 'nova.scheduler.filters.all_filters'
NOVA_WEIGHERS = 'nova.scheduler.weights.all_weighers'
MLACCEL_FILTERS = 'mlaccel.scheduler.filters.all_filters'
MLACCEL_WEIGHERS = 'mlaccel.scheduler.weights.all_weighers'
#: Seconds between two writes of the agents.
AGENTS_TICK = 0.1


def _host_manager_class():
    from nova.scheduler import host_manager

    class ConfigOnlyHostManager(host_manager.HostManager):
        """A real HostManager minus its start-up database reads."""

        def refresh_cells_caches(self):
            pass

        def _init_aggregates(self):
            pass

        def _init_instance_info(self, computes_by_cell=None):
            pass

    return ConfigOnlyHostManager


def build_managers(conf):
    """Return ``(stock, mlaccel)`` HostManagers built from configuration."""
    cls = _host_manager_class()
    group = 'filter_scheduler'
    stock = cls()
    enabled = list(conf.filter_scheduler.enabled_filters) + ['BuildSlotFilter']
    conf.set_override('available_filters', [NOVA_FILTERS, MLACCEL_FILTERS],
                      group)
    conf.set_override('enabled_filters', enabled, group)
    conf.set_override('weight_classes', [NOVA_WEIGHERS, MLACCEL_WEIGHERS],
                      group)
    try:
        mlaccel = cls()
    finally:
        for name in ('available_filters', 'enabled_filters',
                     'weight_classes'):
            conf.clear_override(name, group)
    return stock, mlaccel


def make_hosts(count, images, instances_per_host, rng):
    """Fake compute hosts with full instances of random images."""
    from nova import objects
    from nova.scheduler import host_manager
    from oslo_utils import timeutils

    hosts = []
    for i in range(count):
        name = 'host%05d' % i
        instances = [
            objects.Instance(uuid=str(uuid.uuid4()),
                             image_ref=rng.choice(images), host=name)
            for _ in range(instances_per_host)]
        host = host_manager.HostState(name, name, None)
        host.instances = {inst.uuid: inst for inst in instances}
        vars(host).update({
            'free_ram_mb': rng.randint(1024, 256 * 1024),
            'free_disk_mb': rng.randint(10240, 4 * 1024 * 1024),
            'total_usable_ram_mb': 256 * 1024,
            'total_usable_disk_gb': 4096,
            'vcpus_total': 64, 'vcpus_used': rng.randint(0, 64),
            'num_instances': instances_per_host,
            'num_io_ops': rng.randint(0, 4),
            'hypervisor_version': 1, 'hypervisor_type': 'QEMU',
            'cpu_allocation_ratio': 16.0, 'ram_allocation_ratio': 1.5,
            'disk_allocation_ratio': 1.0,
            'service': {'disabled': False, 'forced_down': False,
                        'updated_at': timeutils.utcnow(),
                        'created_at': timeutils.utcnow()},
            'uuid': str(uuid.uuid4()),
        })
        hosts.append(host)
    return hosts


def report_fields(hosts, images, rng):
    """What each host's agent reports, bar the timestamp.

    Every host has a free build slot, so that both managers weigh the same
    hosts and the ratio is the plugins' own cost, not a saving from hosts
    the BuildSlotFilter took out.
    """
    return [dict(host=h.host,
                 cached_images=frozenset(rng.sample(images, 8)),
                 cache_free_bytes=rng.randint(0, 10 ** 12),
                 fetch_bandwidth=rng.uniform(50e6, 500e6),
                 builds_in_flight=rng.randint(0, 4),
                 build_throughput=rng.uniform(0.05, 2.0),
                 build_limit=rng.randint(6, 16))
            for h in hosts]


#: What the benchmarks' Redis URLs add: members stay in the group for 60 s
#: after their agents' last heartbeat.
REDIS_OPTIONS = '?timeout=60'


def start_server(server):
    """``server``, a fixture of :mod:`mlaccel_lab.testing.servers`, set up.

    Exits naming the system packages to install if its binary is missing.
    Stop it with its ``cleanUp()``.
    """
    try:
        server.check_installed()
    except (servers.RedisServerMissing, servers.EtcdMissing) as exc:
        raise SystemExit(str(exc))
    server.setUp()
    return server


class _RedisWriter:
    """Writes reports as tooz's Redis driver would, announcing each."""

    def __init__(self, coord, group):
        self.coord = coord
        self.key = coord._encode_group_id(group)
        self.changes = drivers.for_client(coord, group)

    def write(self, items):
        """Write ``[(member, raw report)]``, in one pipeline.

        Each write is announced beside it, as publishers do.
        """
        pipe = self.coord._client.pipeline(transaction=False)
        for member, raw in items:
            pipe.hset(self.key, member, self.coord._dumps(raw))
            self.changes.announce(member, pipe)
        pipe.execute()

    def beat(self, members):
        """The members' heartbeats, which keep them in the group."""
        pipe = self.coord._client.pipeline(transaction=False)
        alive_ms = int(self.coord.membership_timeout * 1000)
        for member in members:
            pipe.psetex(self.coord._encode_beat_id(member), alive_ms,
                        self.coord.STILL_ALIVE)
        pipe.execute()


class _EtcdWriter:
    """Writes reports as tooz's etcd3gw driver would, in transactions.

    The keys carry no lease (no heartbeat to keep one): they stay until
    the cluster goes.
    """

    #: Writes per transaction: etcd's default ``--max-txn-ops``.
    BATCH = 128

    def __init__(self, coord, group):
        self.client = coord.client
        self.prefix = coord._prefix_group(group)

    def write(self, items):
        from tooz import utils
        for i in range(0, len(items), self.BATCH):
            self.client.post(self.client.get_url('/kv/txn'), json={
                'success': [{'request_put': {
                    'key': servers.b64(self.prefix + member),
                    'value': servers.b64(utils.dumps(raw))}}
                    for member, raw in items[i:i + self.BATCH]]})

    def beat(self, members):
        pass


_WRITERS = {'tooz.drivers.redis': _RedisWriter,
            'tooz.drivers.etcd3gw': _EtcdWriter}


def play_agents(url, group, fields, share, conn, key_file=None):
    """Publish every host's report, then ``share`` of them per second.

    Runs in a process of its own. One client writes for all the hosts what
    each agent's tooz client would write (the member's report and, on
    Redis, its announcement and its liveness key), through the tooz
    driver's own encoders: ten thousand clients would need ten thousand
    connections. The hosts are republished in turn, each with a new
    timestamp; with ``key_file`` (a deployment key file) signed with the
    host's key and a new sequence number, as agents sign, else unsigned.

    ``conn`` (a pipe's end) takes commands, each answered when done:
    ``('all', None)`` publishes every report now, ``('share', x)`` sets the
    share, ``('stop', None)`` ends.
    """
    from tooz import coordination

    from mlaccel import hostreport
    from mlaccel.statebus import keys
    from mlaccel.statebus import signing

    coord = coordination.get_coordinator(url, b'bench-agents')
    coord.start(start_heart=False)
    try:
        coord.create_group(group).get()
    except coordination.GroupAlreadyExist:
        pass
    writer = _WRITERS[type(coord).__module__](coord, group)
    members = [f['host'].encode() for f in fields]
    host_keys = {k.host: k for k in keys.derive_all(
        keys.read_deployment_keys(key_file), [f['host'] for f in fields])
    } if key_file else None
    sequence = 0

    def encode(f):
        nonlocal sequence
        raw = hostreport.encode(hostreport.HostReport(timestamp=time.time(),
                                                      **f))
        if host_keys is None:
            return raw
        # Above every number an earlier run of the agents gave.
        sequence = max(sequence + 1, time.time_ns() // 1000)
        return signing.sign(host_keys[f['host']], group, sequence, raw)

    def publish(chunk):
        writer.write([(f['host'].encode(), encode(f)) for f in chunk])

    beat_every = coord.membership_timeout / 3
    writer.beat(members)
    publish(fields)
    conn.send('ready')
    turn = itertools.cycle(fields)
    due, last, beaten = 0.0, time.monotonic(), time.monotonic()
    while True:
        if conn.poll(AGENTS_TICK):
            command, value = conn.recv()
            if command == 'stop':
                break
            if command == 'all':
                publish(fields)
            else:
                share = value
            due, last = 0.0, time.monotonic()
            conn.send(command)
            continue
        now = time.monotonic()
        due += share * len(fields) * (now - last)
        last = now
        if due >= 1:
            publish([next(turn) for _ in range(int(due))])
            due -= int(due)
        if now - beaten > beat_every:
            writer.beat(members)
            beaten = now
    coord.stop()


class Agents:
    """:func:`play_agents` in a process of its own."""

    TIMEOUT = 120

    def __init__(self, url, group, fields, share, key_file=None):
        ctx = multiprocessing.get_context('spawn')
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=play_agents, daemon=True,
            args=(url, group, fields, share, child, key_file))
        self.process.start()
        self._answer('the first publication')

    def _answer(self, what):
        if not self.conn.poll(self.TIMEOUT):
            self.stop()
            raise RuntimeError('the agents did not finish %s within %d s'
                               % (what, self.TIMEOUT))
        return self.conn.recv()

    def _ask(self, command, value=None):
        self.conn.send((command, value))
        return self._answer(command)

    def publish_all(self):
        """Republish every report now; return when they are written."""
        self._ask('all')

    def set_share(self, share):
        """Republish ``share`` of the reports per second from now on."""
        self._ask('share', share)

    def stop(self):
        try:
            self.conn.send(('stop', None))
        except OSError:
            pass
        self.process.join(30)
        if self.process.is_alive():
            self.process.kill()


def make_spec(image_id):
    from nova import context
    from nova import objects
    return objects.RequestSpec(
        context=context.get_admin_context(),
        flavor=objects.Flavor(memory_mb=1024, root_gb=10, ephemeral_gb=0,
                              swap=0, vcpus=2, extra_specs={}),
        image=objects.ImageMeta(id=image_id, size=2 * 1024 ** 3,
                                properties=objects.ImageMetaProps()),
        num_instances=1, ignore_hosts=None, force_hosts=None,
        force_nodes=None, instance_group=None, scheduler_hints={},
        retry=None, pci_requests=None, numa_topology=None,
        project_id='p', user_id='u', availability_zone=None,
        is_bfv=False)


def heartbeat(hosts):
    """Mark every host's compute service as just heard from.

    What the computes' service heartbeats do; without it ComputeFilter
    drops every host ``service_down_time`` after it was made.
    """
    from oslo_utils import timeutils
    now = timeutils.utcnow()
    for host in hosts:
        host.service['last_seen_up'] = now


def schedule_once(manager, hosts, spec, collect=True):
    """Filter and weigh ``hosts`` for ``spec``.

    A garbage collection first, unless not ``collect``, so that no request
    pays for the garbage of another.

    :returns: the CPU seconds the scheduling thread spent, the wall
        seconds it took (the CPU time is what other processes on a shared
        machine do not inflate), and how many hosts passed the filters.
    """
    if collect:
        gc.collect()
    wall, cpu = time.perf_counter(), time.thread_time()
    passed = list(manager.get_filtered_hosts(hosts, spec))
    manager.get_weighed_hosts(passed, spec)
    return time.thread_time() - cpu, time.perf_counter() - wall, len(passed)


def fresh_count(cache, hosts):
    """How many of ``hosts`` have a fresh report in the cache now."""
    get = cache.snapshot().get
    return sum(1 for h in hosts if get(h.host) is not None)


class Refreshes:
    """Durations of the cache's background refreshes, sampled."""

    def __init__(self, cache):
        self.cache = cache
        self.seen = cache.refreshes
        self.seconds = []

    def sample(self):
        if self.cache.refreshes != self.seen:
            self.seen = self.cache.refreshes
            self.seconds.append(self.cache.last_refresh_seconds)


def wait_until_fresh(cache, hosts, timeout=120):
    deadline = time.monotonic() + timeout
    while fresh_count(cache, hosts) < len(hosts):
        if time.monotonic() > deadline:
            raise RuntimeError('only %d of %d hosts have a fresh report after '
                               '%d s' % (fresh_count(cache, hosts),
                                         len(hosts), timeout))
        cache.wait_for_refresh(1, 5)


def measure_overhead(managers, hosts, images, rounds, rng, cache, refreshes):
    """Seconds per request of each manager, interleaved in random order.

    :returns: ``(times, fresh, quiet)``: ``{name: [(CPU seconds, wall
        seconds) per round]}``,
        the fewest hosts with a fresh report seen in each round (counted
        before and after it; report timestamps only grow), and whether no
        refresh finished during each round.
    """
    times = {name: [] for name, _ in managers}
    fresh, quiet = [], []
    arms = list(managers)
    for _ in range(rounds):
        spec = make_spec(rng.choice(images))
        rng.shuffle(arms)
        heartbeat(hosts)
        refreshes_before = cache.refreshes
        before = fresh_count(cache, hosts)
        for name, manager in arms:
            times[name].append(schedule_once(manager, hosts, spec))
            if times[name][-1][2] != len(hosts):
                raise RuntimeError('%s kept %d of %d hosts in a round'
                                   % (name, times[name][-1][2], len(hosts)))
        fresh.append(min(before, fresh_count(cache, hosts)))
        quiet.append(cache.refreshes == refreshes_before)
        refreshes.sample()
    return times, fresh, quiet


def median(times, clock=0):
    """Median seconds of one arm on one clock (0: CPU, 1: wall)."""
    return statistics.median(t[clock] for t in times)


def round_ratios(times, clock=0, keep=None):
    """mlaccel's time over stock's in each round ``keep`` says (all)."""
    return [m[clock] / s[clock]
            for i, (m, s) in enumerate(zip(times['mlaccel'], times['stock']))
            if keep is None or keep[i]]


def ratio(times, clock=0, keep=None):
    """The median of :func:`round_ratios`."""
    return statistics.median(round_ratios(times, clock, keep))


def iqr(values):
    """``(first quartile, third quartile)`` of ``values``."""
    quartiles = statistics.quantiles(values, n=4, method='inclusive')
    return quartiles[0], quartiles[2]


def runs(values):
    """``[1000, 1000, 999]`` as ``1000x2 999``."""
    out = []
    for value in values:
        if out and out[-1][0] == value:
            out[-1][1] += 1
        else:
            out.append([value, 1])
    return ' '.join('%dx%d' % (v, n) if n > 1 else str(v) for v, n in out)


def nova_conf():
    """``cfg.CONF`` as a nova-scheduler with mlaccel's options has it.

    Nova in native threads, its objects registered, logging quiet.
    """
    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
    from nova import config as nova_config
    from nova import objects
    from oslo_log import log as logging

    from mlaccel import conf as mlaccel_conf

    nova_config.parse_args([], default_config_files=[])
    logging.set_defaults(default_log_levels=['nova=WARN', 'mlaccel=ERROR'])
    objects.register_all()
    mlaccel_conf.register_opts(cfg.CONF)
    return cfg.CONF


def option_default(group_opts, name):
    return next(opt.default for opt in group_opts if opt.name == name)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m mlaccel_lab.bench scheduler', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='1000,10000',
                        help='host counts to measure (default: %(default)s)')
    parser.add_argument('--rounds', type=int, default=0,
                        help='requests per size (default: 200 at 1,000 '
                             'hosts, fewer at larger sizes, at least 60)')
    parser.add_argument('--instances-per-host', type=int, default=20)
    parser.add_argument('--images', type=int, default=200)
    parser.add_argument('--publish-interval', type=float, default=0,
                        help='seconds between two reports of one host '
                             '(default: a third of report_max_age)')
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)

    conf = nova_conf()
    from mlaccel.conf import statebus as statebus_conf
    from mlaccel.scheduler import hostview

    bus_opts = conf.mlaccel_statebus
    publish_interval = args.publish_interval or bus_opts.report_max_age / 3
    rng = random.Random(args.seed)
    images = [str(uuid.uuid4()) for _ in range(args.images)]

    stock, mlaccel = build_managers(conf)
    print('stock filters:   %s' % ', '.join(
        type(f).__name__ for f in stock.enabled_filters))
    print('stock weighers:  %s' % ', '.join(
        type(w).__name__ for w in stock.weighers))
    print('mlaccel adds:    %s' % ', '.join(
        type(p).__name__ for p in mlaccel.enabled_filters + mlaccel.weighers
        if type(p).__module__.startswith('mlaccel.')))

    bus = cache = None
    results, refresh_ms, fresh_pct = {}, {}, 100.0
    try:
        bus = start_server(servers.RedisServer())
        url = bus.url + REDIS_OPTIONS
        conf.set_override('backend_url', url, 'mlaccel_statebus')
        # The benchmark's agents publish unsigned reports.
        conf.set_override('allow_unsigned_reports', True, 'mlaccel_statebus')
        cache = hostview.get_cache(conf)
        print('\n%6s %6s %9s %10s %6s %13s %6s %12s %8s  %s' % (
            'hosts', 'rounds', 'stock ms', 'mlaccel ms', 'ratio', 'ratio IQR',
            'wall', 'quiet ratio', 'refresh',
            'hosts with a fresh report, per round'))
        for size in [int(s) for s in args.sizes.split(',')]:
            hosts = make_hosts(size, images, args.instances_per_host, rng)
            agents = Agents(url, bus_opts.group.encode(),
                            report_fields(hosts, images, rng),
                            1 / publish_interval)
            try:
                cache.start()
                wait_until_fresh(cache, hosts)
                spec = make_spec(images[0])
                heartbeat(hosts)
                kept = [len(list(m.get_filtered_hosts(hosts, spec)))
                        for m in (stock, mlaccel)]
                if kept != [size, size]:
                    raise RuntimeError(
                        'the managers kept %d and %d of %d hosts: the ratio '
                        'would not compare like with like'
                        % (kept[0], kept[1], size))
                refreshes = Refreshes(cache)
                managers = [('stock', stock), ('mlaccel', mlaccel)]
                # The hosts and their instances, which neither arm makes,
                # out of the collector's full collections.
                gc.collect()
                gc.freeze()
                rounds = args.rounds or max(60, 200 * 1000 // size)
                # One untimed round, so that lazy imports do not count.
                measure_overhead(managers, hosts, images, 1, rng, cache,
                                 refreshes)
                times, fresh, quiet = measure_overhead(
                    managers, hosts, images, rounds, rng, cache, refreshes)
                # A few more refreshes, still at the default interval.
                while len(refreshes.seconds) < 5:
                    cache.wait_for_refresh(1, 30)
                    refreshes.sample()
            finally:
                gc.unfreeze()
                agents.stop()
            results[size] = ratio(times)
            refresh_ms[size] = statistics.median(refreshes.seconds) * 1000
            fresh_pct = min(fresh_pct, 100.0 * min(fresh) / size)
            print('%6d %6d %9.2f %10.2f %6.3f %13s %6.3f %12s %5.0f ms  %s' % (
                size, rounds, median(times['stock']) * 1000,
                median(times['mlaccel']) * 1000, results[size],
                '%.3f-%.3f' % iqr(round_ratios(times)),
                ratio(times, clock=1),
                '%.3f (%d)' % (ratio(times, keep=quiet), sum(quiet))
                if sum(quiet) > 2 else '-', refresh_ms[size], runs(fresh)))
            sys.stdout.flush()
    finally:
        if cache is not None:
            cache.stop()
        conf.clear_override('backend_url', 'mlaccel_statebus')
        conf.clear_override('allow_unsigned_reports', 'mlaccel_statebus')
        if bus is not None:
            bus.cleanUp()

    interval = bus_opts.refresh_interval
    load = os.getloadavg()
    print('\npreconditions: state bus on a redis-server of our own (files '
          'in a temporary directory, removed); agents republish every '
          'report every %.1f s; report cache refresh thread running at '
          'refresh_interval=%.1f s (%s); report_max_age=%.0f s; every host '
          'has a free build slot; arms in random order each round; the '
          'hosts and their instances frozen out of garbage collection, and '
          'a collection before each timed request of either arm; '
          'load average %.2f %.2f %.2f on %d CPUs'
          % (publish_interval, interval,
             'the default' if interval == option_default(
                 statebus_conf.OPTS, 'refresh_interval') else 'NOT default',
             bus_opts.report_max_age, load[0], load[1], load[2],
             os.cpu_count()))
    print('ms: median CPU time of the scheduling thread per request; ratio: '
          'median over the rounds of mlaccel/stock CPU time in the round, '
          'its interquartile range beside it; wall: the same on wall-clock '
          'time; quiet ratio: CPU, over the rounds during which no refresh '
          'finished (how many in brackets); refresh: median wall time of '
          'the background refreshes seen')
    fields = ['sched_overhead_%dk=%.3f' % (size // 1000, r)
              for size, r in results.items() if size % 1000 == 0]
    fields += ['statebus_refresh_%dk_ms=%.1f' % (size // 1000, ms)
               for size, ms in refresh_ms.items() if size % 1000 == 0]
    fields.append('fresh_reports_pct=%s' % (
        '100' if fresh_pct == 100 else '%.1f' % fresh_pct))
    status = 0
    if fresh_pct < 100:
        print('FAILED: some rounds ran with hosts lacking a fresh report',
              file=sys.stderr)
        status = 1
    print('RESULT ' + ' '.join(fields))
    return status


if __name__ == '__main__':
    sys.exit(main())
