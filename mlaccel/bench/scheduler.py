"""Scheduler overhead: stock filters and weighers against stock + mlaccel.

Two real ``nova.scheduler.host_manager.HostManager`` objects are built from
configuration alone, one with Nova's defaults and one with the nova.conf
lines of mlaccel's README, and schedule the same requests over the same
hosts (real ``HostState`` objects filled in memory, each carrying full
instance objects), interleaved so that machine noise hits both alike. Every
host has a fresh report in the state-bus cache, as in a cloud where every
compute runs the agent. The cache's background refresh is measured apart:
one read of 1,000 hosts' reports published on a real file state bus.
"""

import argparse
from concurrent import futures
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid

from oslo_config import cfg

NOVA_FILTERS = 'nova.scheduler.filters.all_filters'
NOVA_WEIGHERS = 'nova.scheduler.weights.all_weighers'
MLACCEL_FILTERS = 'mlaccel.scheduler.filters.all_filters'
MLACCEL_WEIGHERS = 'mlaccel.scheduler.weights.all_weighers'


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


def make_reports(hosts, images, rng):
    """A fresh, encoded host report per host, as tooz would return them.

    Every host has a free build slot, so that both managers weigh the same
    hosts and the ratio is the plugins' own cost, not a saving from hosts
    the BuildSlotFilter took out.
    """
    from mlaccel import hostreport
    now = time.time()
    return {
        h.host.encode(): hostreport.encode(hostreport.HostReport(
            host=h.host, timestamp=now,
            cached_images=frozenset(rng.sample(images, 8)),
            cache_free_bytes=rng.randint(0, 10 ** 12),
            fetch_bandwidth=rng.uniform(50e6, 500e6),
            builds_in_flight=rng.randint(0, 4),
            build_throughput=rng.uniform(0.05, 2.0),
            build_limit=rng.randint(6, 16),
            warm_slots=rng.randint(0, 2)))
        for h in hosts}


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


def schedule_once(manager, hosts, spec):
    """Filter and weigh ``hosts`` for ``spec``; seconds it took."""
    start = time.perf_counter()
    passed = list(manager.get_filtered_hosts(hosts, spec))
    manager.get_weighed_hosts(passed, spec)
    return time.perf_counter() - start


def measure_overhead(stock, mlaccel, hosts, images, rounds, rng):
    """Median seconds per request for each manager, interleaved."""
    times = {'stock': [], 'mlaccel': []}
    for i in range(rounds):
        spec = make_spec(rng.choice(images))
        order = [('stock', stock), ('mlaccel', mlaccel)]
        if i % 2:
            order.reverse()
        for name, manager in order:
            times[name].append(schedule_once(manager, hosts, spec))
    return {name: statistics.median(t) for name, t in times.items()}


def measure_refresh(conf, count, rounds):
    """Median ms of one cache refresh of ``count`` reports on a file bus."""
    from mlaccel import hostreport
    from mlaccel import statebus
    from mlaccel.statebus import reader

    root = tempfile.mkdtemp(prefix='mlaccel-bench-bus-')
    # A long liveness timeout: the members are joined without heartbeats.
    conf.set_override('backend_url', 'file://%s?timeout=3600' % root,
                      'mlaccel_statebus')
    members = []
    try:
        group = statebus.group_id(conf)
        for i in range(count):
            host = 'host%05d' % i
            coord = statebus.coordinator(conf, host)
            coord.start(start_heart=False)
            if i == 0:
                coord.create_group(group).get()
            coord.join_group(group, hostreport.encode(hostreport.HostReport(
                host=host, timestamp=time.time(),
                cached_images=frozenset('image-%d' % j for j in range(8)),
                build_limit=8))).get()
            members.append(coord)
        cache = reader.ReportCache(conf)
        times = []
        for _ in range(rounds):
            # Force a full decode each time, as when every agent republished.
            cache.load({})
            cache.refresh()
            times.append(cache.last_refresh_seconds)
        if len(cache.snapshot().reports) != count:
            raise RuntimeError('refresh read %d of %d reports'
                               % (len(cache.snapshot().reports), count))
        cache.stop()
        return statistics.median(times) * 1000
    finally:
        # Each stop waits about a second for its executor: stop in parallel.
        with futures.ThreadPoolExecutor(64) as pool:
            list(pool.map(lambda coord: coord.stop(), members))
        conf.clear_override('backend_url', 'mlaccel_statebus')
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m mlaccel.bench scheduler', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='1000,10000',
                        help='host counts to measure (default: %(default)s)')
    parser.add_argument('--rounds', type=int, default=0,
                        help='requests per size (default: 60 at 1,000 hosts, '
                             'at least 20 at larger sizes)')
    parser.add_argument('--instances-per-host', type=int, default=20)
    parser.add_argument('--images', type=int, default=200)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args(argv)

    os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
    from nova import config as nova_config
    from nova import objects
    from oslo_log import log as logging

    from mlaccel import conf as mlaccel_conf
    from mlaccel.statebus import reader

    conf = cfg.CONF
    nova_config.parse_args([], default_config_files=[])
    logging.set_defaults(default_log_levels=['nova=WARN', 'mlaccel=WARN'])
    objects.register_all()
    mlaccel_conf.register_opts(conf)
    conf.set_override('refresh_interval', 3600, 'mlaccel_statebus')
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

    results = {}
    print('\n%8s %8s %12s %12s %8s' % ('hosts', 'requests', 'stock ms',
                                       'mlaccel ms', 'ratio'))
    for size in [int(s) for s in args.sizes.split(',')]:
        hosts = make_hosts(size, images, args.instances_per_host, rng)
        cache = reader.get_cache(conf)
        cache.start()
        cache.wait_for_refresh(timeout=30)
        cache.load(make_reports(hosts, images, rng))
        rounds = args.rounds or max(20, 60 * 1000 // size)
        spec = make_spec(images[0])
        kept = [len(list(m.get_filtered_hosts(hosts, spec)))
                for m in (stock, mlaccel)]
        if kept[0] != kept[1]:
            raise RuntimeError('the managers kept %d and %d hosts: the '
                               'ratio would not compare like with like'
                               % tuple(kept))
        # One untimed round each, so that lazy imports do not count.
        measure_overhead(stock, mlaccel, hosts, images, 1, rng)
        median = measure_overhead(stock, mlaccel, hosts, images, rounds, rng)
        ratio = median['mlaccel'] / median['stock']
        results[size] = ratio
        print('%8d %8d %12.2f %12.2f %8.3f' % (
            size, rounds, median['stock'] * 1000, median['mlaccel'] * 1000,
            ratio))
        cache.stop()

    refresh_ms = measure_refresh(conf, 1000, 5)
    print('\nstate bus refresh, 1,000 reports on the file backend: '
          '%.1f ms (background thread)' % refresh_ms)
    fields = ['sched_overhead_%dk=%.3f' % (size // 1000, ratio)
              for size, ratio in results.items() if size % 1000 == 0]
    fields.append('statebus_refresh_1k_ms=%.1f' % refresh_ms)
    print('RESULT ' + ' '.join(fields))
    return 0


if __name__ == '__main__':
    sys.exit(main())
