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

"""mlaccel-agent on the all-in-one cloud: pre-fetch, and build pacing.

``python -m mlaccel_lab.bench agent [--image-mib 1024] [--host HOST]
[--burst 20] [--burst-image-mib 32] [--repetitions 3] [--limits 1,2,4,10]
[--seed 0]`` runs against the all-in-one cloud named by
``$MLACCEL_AIO_BASE`` (``python -m mlaccel_lab.testing.aio up``).

*First boot.* It uploads an image of random bytes to Glance and boots
servers of it on the last compute, with that compute's agent stopped (so
that demand never makes it pre-fetch the image on its own). Two arms:
cold, the build downloads the image; pre-fetched, the image is first
fetched into the compute's cache with the agent's Glance fetcher. The
cache is emptied before every arm; the arms run once a round,
``--repetitions`` rounds, in an order drawn anew each round. A boot is
timed from the create request to ACTIVE, a pre-fetch from its start to
its file in the cache.

*Burst.* ``--burst`` servers, each of an image of its own uploaded for
that burst (so every build downloads its image through nova-compute, the
real build path, and no arm meets images an earlier one asked for), are
asked for at once; the makespan runs from the first create request to the
last server ACTIVE. Stock: the agents stopped (no reports, the scheduler
acts as stock Nova) and every compute restarted with
``max_concurrent_builds`` set to each of ``--limits`` (1, 2, 4 and 10).
mlaccel: the agents running, nova-compute at its default bound, builds
paced by the agents' adaptive limits. The arms run interleaved as the
first boot's do;
caches are emptied before each burst. The last line is::

    RESULT first_boot_prefetch_ratio=<r> first_boot_with_prefetch_ratio=<r>
        burst_makespan_ratio=<r>

(on one line): the median pre-fetched boot over the median cold boot; the
median of pre-fetch plus pre-fetched boot over the median cold boot (the
pre-fetch's own time counted); and the adaptive arm's median makespan over
the best static limit's median (the limit with the lowest median, chosen
after the fact). Lower is better for all three.
"""

import argparse
import concurrent.futures
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid

from oslo_concurrency import lockutils

from mlaccel.agent import cachefile
from mlaccel.agent import cloud as agent_cloud
from mlaccel.agent.fetchers import glance
from mlaccel.agent import inventory
from mlaccel.agent import novaconf
from mlaccel import conf as mlaccel_conf
from mlaccel import inifile
from mlaccel import interleave
from mlaccel_lab.testing.aio import agents as aio_agents
from mlaccel_lab.testing.aio import cloud as aio_cloud
from mlaccel_lab.testing.aio import configs as aio_configs
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import procs

WAIT = 900
#: The static max_concurrent_builds swept for stock Nova.
STATIC_LIMITS = (1, 2, 4, 10)


def _image_file(directory, mib):
    path = os.path.join(directory, 'bench.raw')
    with open(path, 'wb') as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    return path


def _boot(conn, host, image_id, flavor_id):
    """Seconds from the create request to ACTIVE; the server is deleted."""
    started = time.monotonic()
    server = conn.compute.create_server(
        name='mlaccel-bench-agent', image_id=image_id, flavor_id=flavor_id,
        networks='none', availability_zone='nova:%s' % host)
    try:
        conn.compute.wait_for_server(server, interval=0.2, wait=WAIT)
        return time.monotonic() - started
    finally:
        conn.compute.delete_server(server, ignore_missing=True)
        conn.compute.wait_for_delete(server, interval=0.5, wait=WAIT)


def _uncache(settings, image_id):
    name = inventory.cache_name(image_id)
    with lockutils.lock(name, lock_file_prefix='nova-', external=True,
                        lock_path=settings.lock_dir):
        try:
            os.unlink(os.path.join(settings.cache_dir, name))
        except FileNotFoundError:
            pass


def _settings(lay, host):
    return novaconf.load(aio_configs.compute_config_files(lay, host))


def _set_max_builds(lay, host, value):
    """``host``'s bound on concurrent builds (``None``: Nova's defaults).

    On native threads (nova 34's default) builds and snapshots share one
    executor of ``max(max_concurrent_builds, max_concurrent_snapshots)``
    workers, so both are set: the bound is then exactly ``value``.
    """
    ini = inifile.IniFile(aio_configs.compute_config_files(lay, host)[-1])
    for key in ('max_concurrent_builds', 'max_concurrent_snapshots'):
        ini.set('DEFAULT', key, [] if value is None else [str(value)])
    ini.save()


def _restart_computes(lay, conn, max_builds, agents):
    """Every compute restarted with ``max_builds``, with or without agent."""
    for host in lay.compute_hosts():
        aio_cloud.stop_compute(lay, host)
        _set_max_builds(lay, host, max_builds)
    since = time.time()
    for host in lay.compute_hosts():
        aio_cloud.start_compute(lay, host, agent=agents)
    for host in lay.compute_hosts():
        aio_cloud.wait_compute_up(lay, conn, host, since)


def _burst(conn, lay, images, flavor_id):
    """Seconds from the first create request to the last server ACTIVE.

    :raises RuntimeError: if a server ends in ERROR (the burst must never
        fail a boot, stock or not).
    """
    prefix = 'mlaccel-bench-burst-%s-' % uuid.uuid4().hex[:6]

    def create(i):
        return conn.compute.create_server(
            name='%s%d' % (prefix, i), image_id=images[i],
            flavor_id=flavor_id, networks='none').id

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(images)) as pool:
        ids = list(pool.map(create, range(len(images))))
    try:
        while True:
            states = {server.id: (server.status, server.compute_host)
                      for server in conn.compute.servers(
                          details=True, name='^' + prefix)}
            if any(state == 'ERROR' for state, _ in states.values()):
                raise RuntimeError('a server of the burst went to ERROR')
            if len(states) == len(ids) and all(
                    state == 'ACTIVE' for state, _ in states.values()):
                seconds = time.monotonic() - started
                break
            if time.monotonic() - started > WAIT:
                raise RuntimeError('the burst did not end within %d s'
                                   % WAIT)
            time.sleep(0.25)
        hosts = sorted({host for _, host in states.values()})
        return seconds, hosts
    finally:
        for server_id in ids:
            conn.compute.delete_server(server_id, ignore_missing=True)
        deadline = time.monotonic() + WAIT
        while list(conn.compute.servers(name='^' + prefix)) and \
                time.monotonic() < deadline:
            time.sleep(0.5)


def _uncache_all(lay, image_ids):
    for host in lay.compute_hosts():
        settings = _settings(lay, host)
        for image_id in image_ids:
            _uncache(settings, image_id)


def _upload(conn, lay, mib, name):
    with tempfile.TemporaryDirectory(dir=lay.base) as tmp:
        with open(_image_file(tmp, mib), 'rb') as data:
            image = conn.image.create_image(
                name=name, data=data, disk_format='raw',
                container_format='bare')
    return conn.image.wait_for_status(image, 'active', wait=WAIT)


#: The adaptive arm's name among the static limits.
ADAPTIVE = 'adaptive'


def _arm_label(arm):
    return 'adaptive (mlaccel-agent)' if arm == ADAPTIVE \
        else 'static max_concurrent_builds=%d' % arm


def _one_burst(conn, lay, arm, count, mib, flavor_id, label):
    """One burst of ``count`` new images under ``arm``; its makespan.

    The images are uploaded for this burst and deleted after it: no arm
    meets images an earlier burst asked for (the agents would read those
    builds as demand and pre-fetch them, a history no real burst of new
    images has), so the arms can run in any order.
    """
    adaptive = arm == ADAPTIVE
    _restart_computes(lay, conn, None if adaptive else arm, agents=adaptive)
    if adaptive:
        _wait_reports(lay)
    images = []
    try:
        for i in range(count):
            images.append(_upload(conn, lay, mib,
                                  'mlaccel-bench-burst-%s-%d' % (label, i)))
        ids = [image.id for image in images]
        _uncache_all(lay, ids)
        return _burst(conn, lay, ids, flavor_id)
    finally:
        _uncache_all(lay, [image.id for image in images])
        for image in images:
            conn.image.delete_image(image, ignore_missing=True)


def _interleaved(arms, repetitions, seed, measure):
    """``({arm: [measure(round, arm)]}, orders)``, arms interleaved.

    Every arm runs once a round, ``repetitions`` rounds, in an order drawn
    anew each round (:func:`mlaccel.interleave.orders`).
    """
    orders = interleave.orders(arms, repetitions, seed)
    samples = {arm: [] for arm in arms}
    for round_, order in enumerate(orders):
        for arm in order:
            samples[arm].append(measure(round_, arm))
    return samples, orders


def _orders_text(orders):
    return ' '.join('/'.join(str(arm) for arm in order) for order in orders)


def _medians_text(medians):
    return ', '.join('%s %.2f s' % item for item in medians.items())


def burst_sweep(conn, lay, count, mib, flavor_id, repetitions=3, seed=0,
                out=sys.stderr, limits=STATIC_LIMITS):
    """``({arm: [makespans]}, orders)`` of the adaptive and static arms.

    ``ADAPTIVE`` and each of ``limits`` (static bounds), interleaved
    (:func:`_interleaved`). Leaves every compute as the cloud made it
    (Nova's default bound, agents running).
    """
    def measure(round_, arm):
        seconds, hosts = _one_burst(conn, lay, arm, count, mib, flavor_id,
                                    '%d-%s' % (round_, arm))
        print('round %d: burst of %d (%d MiB images) %s: %.2f s on %s'
              % (round_, count, mib, _arm_label(arm), seconds,
                 ', '.join(hosts)), file=out, flush=True)
        return seconds

    try:
        return _interleaved([ADAPTIVE] + list(limits), repetitions,
                            seed, measure)
    finally:
        _restart_computes(lay, conn, None, agents=True)


def _wait_reports(lay, timeout=60):
    """Wait until every compute's agent has a report on the bus."""
    deadline = time.monotonic() + timeout
    while len(aio_agents.reports(lay)) < len(lay.compute_hosts()):
        if time.monotonic() > deadline:
            raise RuntimeError('no report from every agent within %d s'
                               % timeout)
        time.sleep(0.5)


def _prefetch(fetcher, image):
    """Seconds ``fetcher`` took to put ``image`` into the cache."""
    started = time.monotonic()
    if fetcher.fetch(image, threading.Event()) is None:
        raise RuntimeError('image %s was cached before its pre-fetch'
                           % image.id)
    return time.monotonic() - started


#: The first boot's arms: booted cold, or after a pre-fetch.
COLD, PREFETCHED = 'cold', 'prefetched'


def first_boot(conn, lay, host, mib, flavor_id, repetitions=3, seed=0,
               out=sys.stderr):
    """``({arm: [(pre-fetch s, boot s)]}, orders)`` of first boots on ``host``.

    :data:`COLD` and :data:`PREFETCHED` (see the module's doc),
    interleaved (:func:`_interleaved`); a cold boot's pre-fetch is 0 s.
    """
    settings = _settings(lay, host)
    fetcher = glance.GlanceFetcher(
        settings, mlaccel_conf.CONF.mlaccel_agent,
        agent_cloud.Cloud(None, connect=lambda n: conn),
        inventory.ImageCache(settings.cache_dir))
    image = _upload(conn, lay, mib, 'mlaccel-bench-agent')
    meta = cachefile.ImageMeta.from_glance(conn.image.get_image(image.id))

    def measure(round_, arm):
        _uncache(settings, image.id)
        fetch = _prefetch(fetcher, meta) if arm == PREFETCHED else 0.0
        boot = _boot(conn, host, image.id, flavor_id)
        print('round %d: image %d MiB on %s, %s: pre-fetch %.2f s, first '
              'boot %.2f s' % (round_, mib, host, arm, fetch, boot),
              file=out, flush=True)
        return fetch, boot

    procs.stop(lay, aio_agents.service(host))
    try:
        return _interleaved((COLD, PREFETCHED), repetitions, seed, measure)
    finally:
        _uncache(settings, image.id)
        conn.image.delete_image(image, ignore_missing=True)
        aio_agents.start(lay, host)


def first_boot_summary(samples):
    """``(medians, ratios)`` of :func:`first_boot`'s samples.

    Medians of the cold boot, the pre-fetched boot and, round by round,
    the pre-fetch plus its boot; the ratios are the latter two over the
    first (``first_boot_prefetch_ratio``,
    ``first_boot_with_prefetch_ratio``).
    """
    medians = {
        'cold boot': statistics.median(b for _, b in samples[COLD]),
        'pre-fetched boot': statistics.median(
            b for _, b in samples[PREFETCHED]),
        'pre-fetch + boot': statistics.median(
            f + b for f, b in samples[PREFETCHED])}
    cold = medians['cold boot']
    return medians, {
        'first_boot_prefetch_ratio': medians['pre-fetched boot'] / cold,
        'first_boot_with_prefetch_ratio': medians['pre-fetch + boot'] / cold}


def main(argv):
    parser = argparse.ArgumentParser(prog='python -m mlaccel_lab.bench agent')
    parser.add_argument('--image-mib', type=int, default=1024,
                        help='image of the first-boot comparison')
    parser.add_argument('--host', help='compute host of the first boot '
                        '(default: the last)')
    parser.add_argument('--burst', type=int, default=20,
                        help='servers asked for at once')
    parser.add_argument('--burst-image-mib', type=int, default=32,
                        help='size of each burst server\'s own image')
    parser.add_argument('--repetitions', type=int, default=3,
                        help='rounds of the first-boot and of the burst arms '
                        '(default: 3)')
    parser.add_argument('--limits', default=','.join(map(str, STATIC_LIMITS)),
                        help='the static arms\' max_concurrent_builds, '
                        'comma-separated (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the arms\' order (default: 0)')
    args = parser.parse_args(argv)
    try:
        limits = tuple(int(v) for v in args.limits.split(','))
    except ValueError:
        limits = ()
    if not limits or min(limits) < 1:
        parser.error('--limits: whole numbers of 1 or more, comma-separated')
    base = os.environ.get(aio_layout.BASE_ENV)
    if not base:
        print('set %s to the base directory of a running all-in-one cloud'
              % aio_layout.BASE_ENV, file=sys.stderr)
        return 2
    lay = aio_layout.Layout(base)
    host = args.host or lay.compute_hosts()[-1]
    need = 3 * ((args.image_mib + args.burst * args.burst_image_mib) << 20)
    if shutil.disk_usage(lay.base).free < need:
        print('need %d MiB free for the images, their copies in Glance and '
              'the caches' % (need >> 20), file=sys.stderr)
        return 2
    missing = [name for name in
               ['nova-compute-' + h for h in lay.compute_hosts()] +
               [aio_agents.service(h) for h in lay.compute_hosts()]
               if not procs.running(lay, name)]
    if missing or len(lay.compute_hosts()) < 2:
        print('need a cloud with at least two computes, each with its '
              'agent; not running: %s' % (', '.join(missing) or '-'),
              file=sys.stderr)
        return 2
    print('preconditions: %d computes with mlaccel-agent, nova %s, images '
          'of random bytes (no cache hit but the pre-fetch)'
          % (len(lay.compute_hosts()), _nova_version()), file=sys.stderr)
    conn = aio_cloud.connect(lay)
    flavor_id = lay.load_cloud()['flavor_id']
    boots, boot_orders = first_boot(conn, lay, host, args.image_mib,
                                    flavor_id, args.repetitions, args.seed)
    boot_medians, ratios = first_boot_summary(boots)
    print('preconditions: first boot on %s, its agent stopped (no pre-fetch '
          'but the benchmark\'s own); arms interleaved, order per round: %s; '
          'cache emptied before every arm'
          % (host, _orders_text(boot_orders)), file=sys.stderr)
    print('first boot medians over %d rounds: %s'
          % (args.repetitions, _medians_text(boot_medians)), file=sys.stderr)
    burst, orders = burst_sweep(conn, lay, args.burst, args.burst_image_mib,
                                flavor_id, args.repetitions, args.seed,
                                limits=limits)
    median = {arm: statistics.median(times) for arm, times in burst.items()}
    static = [arm for arm in median if arm != ADAPTIVE]
    best = min(static, key=median.get)
    print('preconditions: burst arms interleaved, order per round: %s; new '
          'images for every burst; caches emptied before every burst'
          % _orders_text(orders), file=sys.stderr)
    print('burst medians over %d rounds: %s; best static '
          'max_concurrent_builds=%d'
          % (args.repetitions, _medians_text(median), best), file=sys.stderr)
    ratios['burst_makespan_ratio'] = median[ADAPTIVE] / median[best]
    print('RESULT ' + ' '.join('%s=%.3f' % item for item in ratios.items()))
    return 0


def _nova_version():
    from importlib import metadata
    return metadata.version('nova')
