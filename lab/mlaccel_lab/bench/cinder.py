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

"""Volume-from-image latency: stock Cinder, its built-in cache, mlaccel.

``python -m mlaccel_lab.bench cinder [--sizes 256,1024] [--burst 10]
[--rounds 3]`` runs
Cinder's own API, scheduler and volume manager in this process (the
functional-test harness: SQLite, fake messaging) over the file-backed test
backend, in three arms:

* stock: the backend driver, no image-volume cache;
* builtin: the backend driver with Cinder's image-volume cache (its per-image
  lock real, as with a coordination backend);
* mlaccel: the mirror-volume driver over the same backend.

It runs them ``--rounds`` times (3), each round in a rotated order so
that each arm runs first, in the middle and last, and reports the median of
each figure over the rounds; every run starts with its caches empty (a new
harness: database, files, images). For each image size it measures, from
Cinder's own timestamps (the API accepting the request to the volume
manager finishing it): a cold create,
the built-in cache's first and steady (warm) creates, mlaccel's first create
after a pre-warm (median over three images; the ready pool at its defaults,
filled or standing aside before the create, as after a real pre-warm), its
steady create (a clone of the golden volume) and a ready-pool hit (forced,
whatever the adaptive pool would choose), and the makespan and downloads of
a burst of concurrent creates for an image not cached. Beside it, the same
burst for an image mlaccel has already cached (no download: what is left
is Cinder's own handling of the burst's requests and the backend's clones)
shows, where clones are copy-on-write, how far below the built-in cache's
burst any driver whose pool is empty could go.
The files (images, volumes, Cinder's image conversion directory) go to a
directory where clones are reflinks: the default temporary directory if its
file system has them, else, as root, a new XFS with reflink on a loop device
(:func:`mlaccel_lab.testing.reflink.reflink_dir`); failing that, plain
copies, and the first line says why. Concurrency mode: native threads unless
OS_CINDER_DISABLE_EVENTLET_PATCHING says otherwise. The fake message
transport wakes its listeners on delivery, as a broker would, rather than
every 50 ms (:class:`mlaccel_lab.testing.cinderharness._Delivery`); the second
line says so and whether golden volumes are written with direct I/O. The
last line is::

    RESULT prewarm_first_vs_builtin_warm=<r> pool_hit_vs_builtin_warm=<r>
    burst_makespan_vs_builtin=<r> burst_downloads=<n>

for each size the ratio of mlaccel's median to the built-in cache's, the
median of those over the sizes (lower is better), and mlaccel's most
downloads in a burst of the largest size.
"""

import os

# Cinder's test packages patch on import by the environment alone.
os.environ.setdefault('OS_CINDER_DISABLE_EVENTLET_PATCHING', '1')
# autopep8: off
from cinder import monkey_patch; monkey_patch.patch()  # noqa: E402,E702
# autopep8: on

import argparse  # noqa: E402
import contextlib  # noqa: E402
import hashlib  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

from cinder import context  # noqa: E402
from cinder.db import api as db  # noqa: E402
# Loaded before cinder.image.glance, which cannot be imported first.
from cinder.image import image_utils  # noqa: E402,F401
from cinder import objects  # noqa: E402

from mlaccel.cinder import imagewrite  # noqa: E402
from mlaccel.conf import cinder as cinder_opts  # noqa: E402
from mlaccel_lab.testing import cinderharness  # noqa: E402
from mlaccel_lab.testing import reflink  # noqa: E402

objects.register_all()
MIB = cinderharness.MIB
STEADY = 5
#: Images pre-warmed, each then asked for once: the median of their first
#: creates is mlaccel's first create after a pre-warm.
FIRSTS = 3


def _chunks(seed, size):
    block = hashlib.sha512(seed.encode()).digest() * (MIB // 64)
    left = size
    i = 0
    while left > 0:
        chunk = block[i % 64:] + block[:i % 64]
        yield chunk[:min(MIB, left)]
        left -= MIB
        i += 1


class _Run(cinderharness.MirrorTestBase):
    """One configuration; ``measure`` fills ``self.out``."""

    MOCK_TOOZ = False
    KIND = None

    def __init__(self, sizes, burst, out):
        super().__init__('runTest')
        self.sizes = sizes
        self.burst_n = burst
        self.out = out

    def setUp(self):
        super().setUp()
        if not cinderharness.prompt_delivery():
            raise RuntimeError('the fake message transport still polls')
        ctx = context.get_admin_context()
        for project in (cinderharness.fake.PROJECT_ID,
                        cinderharness.INTERNAL_PROJECT):
            db.quota_create(ctx, project, 'volumes', 1000)
            db.quota_create(ctx, project, 'gigabytes', 100000)

    def image(self, seed, size):
        image = self.images.add_chunks(_chunks(seed, size))
        # Every arm starts timing with the new image on disk, not with its
        # writeback competing with the requests measured.
        os.sync()
        return image

    def timed(self, image_id):
        # Nor with the writeback of earlier requests' data.
        os.sync()
        volume_id = self.create(image_id)
        v = self.wait(volume_id, timeout=1800)
        if v['status'] != 'available':
            raise RuntimeError('volume %s ended %s' % (volume_id,
                                                       v['status']))
        return self.create_seconds(volume_id), volume_id

    def delete(self, volume_id):
        self.api.delete_volume(volume_id)
        self.wait_gone(volume_id, timeout=600)

    def median_create(self, image_id, before=None):
        """Median seconds of ``STEADY`` creates, each volume deleted after.

        ``before`` runs before each create (e.g. to wait for a pool clone).
        """
        times = []
        for _ in range(STEADY):
            if before is not None:
                before()
            seconds, vid = self.timed(image_id)
            times.append(seconds)
            self.delete(vid)
        return statistics.median(times)

    def burst(self, image_id):
        os.sync()
        ids = super().burst(image_id, self.burst_n)
        times = []
        for volume_id in ids:
            v = self.wait(volume_id, timeout=3600)
            if v['status'] != 'available':
                raise RuntimeError('burst volume ended %s' % v['status'])
            times.append(self.volume_times(volume_id))
        makespan = (max(t[1] for t in times)
                    - min(t[0] for t in times)).total_seconds()
        for volume_id in ids:
            self.delete(volume_id)
        return makespan, self.images.downloads[image_id]

    def runTest(self):
        for size in self.sizes:
            self.out[size] = self.measure(size * MIB, 's%d' % size)
        backend = getattr(self.driver, '_get_driver', lambda: self.driver)()
        self.out['clones'] = dict(backend.clones)


class _Stock(_Run):
    VOLUME_DRIVER = cinderharness.BACKEND
    KIND = 'stock'

    def measure(self, size, seed):
        image = self.image(seed + 'stock', size)
        cold, vid = self.timed(image['id'])
        self.delete(vid)
        burst = self.image(seed + 'stock-burst', size)
        makespan, downloads = self.burst(burst['id'])
        return {'cold': cold, 'burst': makespan, 'downloads': downloads}


class _Builtin(_Run):
    VOLUME_DRIVER = cinderharness.BACKEND
    BACKEND_FLAGS = {'image_volume_cache_enabled': True}
    KIND = 'builtin'

    def measure(self, size, seed):
        image = self.image(seed + 'builtin', size)
        first, vid = self.timed(image['id'])
        self.delete(vid)
        warm = self.median_create(image['id'])
        burst = self.image(seed + 'builtin-burst', size)
        makespan, downloads = self.burst(burst['id'])
        return {'first': first, 'warm': warm,
                'burst': makespan, 'downloads': downloads}


def _default(name):
    """The default of one of mlaccel's ``[mlaccel_cinder]`` options."""
    return next(o.default for o in cinder_opts.OPTS if o.name == name)


class _Mlaccel(_Run):
    # The ready pool as an operator gets it: its default size, adaptive.
    CACHE_FLAGS = {'pool_size': _default('pool_size'),
                   'pool_adaptive': _default('pool_adaptive')}
    KIND = 'mlaccel'

    def wait_pool(self, image_id, timeout=1800):
        """Wait until the pool is at its target and its refills are done.

        The target is what the pool chooses: none where it stands aside.
        """
        pool = self.mirror.pool
        deadline = time.monotonic() + timeout
        while True:
            entry = self.mirror.cache.peek(image_id)
            if entry is None or pool.count(image_id) >= pool.target(
                    image_id, entry.pinned) and pool.idle():
                return
            if time.monotonic() > deadline:
                raise RuntimeError('the ready pool was not refilled')
            time.sleep(0.05)

    def measure(self, size, seed):
        pool = self.mirror.pool
        pool.size = self.CACHE_FLAGS['pool_size']
        image = self.image(seed + 'mlaccel', size)
        ctx = context.RequestContext(cinderharness.fake.USER_ID,
                                     cinderharness.fake.PROJECT_ID)
        firsts = []
        hits_before = self.mirror.stats['pool_hit']
        for n in range(FIRSTS):
            # Each on an image of its own, pre-warmed just before, the pool
            # as configured: the pre-warm is done when the pool has filled
            # (or stood aside).
            other = image if n == 0 else self.image(
                '%smlaccel-first%d' % (seed, n), size)
            self.mirror.prewarm(ctx, other, self.images)
            self.wait_pool(other['id'])
            first, vid = self.timed(other['id'])
            self.delete(vid)
            firsts.append(first)
            if other is not image:
                self.mirror.evict(other['id'])
        first = statistics.median(firsts)
        first_pool_hits = self.mirror.stats['pool_hit'] - hits_before
        # Steady creates are clones of the golden volume: no pool.
        pool.drain(image['id'])
        pool.size = 0
        warm = self.median_create(image['id'])
        # Pool hits are measured whatever the adaptive pool would choose;
        # the costs it chooses by are reported beside them.
        pool.size, pool.adaptive = 1, False

        def refilled():
            pool.want(image['id'])
            self.wait_pool(image['id'])

        pool_hit = self.median_create(image['id'], before=refilled)
        pool.size, pool.adaptive = 0, self.CACHE_FLAGS['pool_adaptive']
        # The burst's requests with no download: where clones are
        # copy-on-write, the floor of any driver whose pool is empty.
        cached, _downloads = self.burst(image['id'])
        burst = self.image(seed + 'mlaccel-burst', size)
        makespan, downloads = self.burst(burst['id'])
        self.mirror.evict(image['id'])
        return {'prewarm_first': first, 'first_pool_hits': first_pool_hits,
                'warm': warm, 'pool_hit': pool_hit, 'burst': makespan,
                'downloads': downloads, 'burst_cached': cached,
                'pool_hits': self.mirror.stats['pool_hit'],
                'clone_s': pool.clone_seconds,
                'handover_s': pool.handover_seconds}


def _run(cls, sizes, burst, scratch, reflink):
    out = {}
    result = unittest.TestResult()
    case = cls(sizes, burst, out)
    case.SCRATCH = scratch
    case.BACKEND_FLAGS = dict(cls.BACKEND_FLAGS,
                              mlaccel_file_volume_reflink=reflink)
    case.run(result)
    for _case, trace in result.errors + result.failures:
        print(trace, file=sys.stderr)
    if not result.wasSuccessful():
        raise SystemExit('%s run failed' % cls.KIND)
    return out


ARMS = (_Stock, _Builtin, _Mlaccel)


def orders(rounds):
    """The arms' order in each round: rotated, so each runs first in turn."""
    return [ARMS[r % len(ARMS):] + ARMS[:r % len(ARMS)]
            for r in range(rounds)]


def _combine(runs):
    """One arm's rounds as one: medians, worst downloads, summed counts."""
    out = {}
    for size in runs[0]:
        keys = runs[0][size]
        out[size] = {k: statistics.median(r[size][k] for r in runs)
                     for k in keys}
        for k in ('downloads', 'pool_hits'):
            if k in keys:
                out[size][k] = max(r[size][k] for r in runs)
        if 'first_pool_hits' in keys:
            out[size]['first_pool_hits'] = sum(r[size]['first_pool_hits']
                                               for r in runs)
    return out


def _measure(sizes, burst, scratch, reflink, rounds):
    runs = {cls.KIND: [] for cls in ARMS}
    for n, order in enumerate(orders(rounds), 1):
        print('round %d of %d: %s' % (n, rounds,
                                      ', '.join(c.KIND for c in order)))
        for cls in order:
            started = time.monotonic()
            out = _run(cls, sizes, burst, scratch, reflink)
            clones = out.pop('clones')
            print('%-8s done in %.0f s, clones %s: %s' % (
                cls.KIND, time.monotonic() - started, clones,
                {s: {k: round(v, 3) for k, v in r.items()}
                 for s, r in out.items()}))
            if clones['reflink'] and clones['copy'] or (
                    not reflink and clones['reflink']):
                raise SystemExit('%s: clones were not all made one way: %s'
                                 % (cls.KIND, clones))
            runs[cls.KIND].append(out)
    return {kind: _combine(r) for kind, r in runs.items()}


def main(argv):
    parser = argparse.ArgumentParser(prog='python -m mlaccel_lab.bench cinder')
    parser.add_argument('--sizes', default='256,1024',
                        help='image sizes in MiB, comma-separated')
    parser.add_argument('--burst', type=int, default=10,
                        help='concurrent creates in the burst')
    parser.add_argument('--rounds', type=int, default=3,
                        help='rounds of the three arms, each round in a '
                             'rotated order; the figures are medians over '
                             'the rounds')
    parser.add_argument('--clones', choices=('auto', 'copy'),
                        default='auto',
                        help='auto: reflink clones where a file system '
                             'with reflink can be had; copy: every clone '
                             'copies the data')
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(',')]
    # Stopped by a signal: still unmount the scratch file system.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    mode = 'eventlet' if monkey_patch.is_patched() else 'native threads'
    if args.clones == 'copy':
        scratch_dir = contextlib.nullcontext(
            (None, 'plain copies (--clones copy)'))
    else:
        scratch_dir = reflink.reflink_dir(tempfile.gettempdir())
    with scratch_dir as (scratch, how):
        directory = scratch or tempfile.gettempdir()
        print('cinder volume-from-image, %s, file backend in %s, clones: %s'
              % (mode, directory, how))
        print('messages: in-process fake transport, listeners woken on '
              'delivery (not every 50 ms); golden volumes written with '
              'direct I/O: %s' % ('yes' if imagewrite.direct_io(directory)
                                  else 'no, buffered and synced'))
        results = _measure(sizes, args.burst, scratch,
                           args.clones != 'copy', args.rounds)
    stock, builtin, ml = (results[k] for k in ('stock', 'builtin',
                                               'mlaccel'))
    print('medians over %d rounds, the arms in a rotated order each round'
          % args.rounds)
    print('%8s %9s %9s %9s %9s %9s %9s %9s %9s' % (
        'MiB', 'stock', 'bi_first', 'bi_warm', 'ml_first', 'ml_warm',
        'ml_pool', 'bi_burst', 'ml_burst'))
    for s in sizes:
        print('%8d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f' % (
            s, stock[s]['cold'], builtin[s]['first'], builtin[s]['warm'],
            ml[s]['prewarm_first'], ml[s]['warm'], ml[s]['pool_hit'],
            builtin[s]['burst'], ml[s]['burst']))
    for s in sizes:
        print('%d MiB: backend clone %.3f s, pool handover %.3f s (moving '
              'averages): the adaptive pool %s; first creates after a '
              'pre-warm from the pool: %d of %d' % (
                  s, ml[s]['clone_s'], ml[s]['handover_s'],
                  'serves' if ml[s]['clone_s'] > ml[s]['handover_s']
                  else 'stands aside, clones are cheaper',
                  ml[s]['first_pool_hits'], FIRSTS * args.rounds))
    for s in sizes:
        print('%d MiB, the same burst for an image already cached (no '
              'download; left: Cinder\'s handling of its %d requests and '
              'the backend\'s clones): %.3f s, %.2f of the built-in '
              'cache\'s burst' % (
                  s, args.burst, ml[s]['burst_cached'],
                  ml[s]['burst_cached'] / builtin[s]['burst']))
    print('burst downloads: stock %s, builtin %s, mlaccel %s' % (
        [stock[s]['downloads'] for s in sizes],
        [builtin[s]['downloads'] for s in sizes],
        [ml[s]['downloads'] for s in sizes]))

    def ratio(key, base_key, base=builtin):
        return statistics.median(ml[s][key] / base[s][base_key]
                                 for s in sizes)

    print('RESULT prewarm_first_vs_builtin_warm=%.3f '
          'pool_hit_vs_builtin_warm=%.3f burst_makespan_vs_builtin=%.3f '
          'burst_downloads=%d' % (
              ratio('prewarm_first', 'warm'), ratio('pool_hit', 'warm'),
              ratio('burst', 'burst'), ml[max(sizes)]['downloads']))
    return 0
