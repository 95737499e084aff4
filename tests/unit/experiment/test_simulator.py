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

"""The simulator's mechanisms, on workloads small enough to reason about."""

import dataclasses
from unittest import mock

import jsonschema

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import calibration
from mlaccel_lab.experiment import results
from mlaccel_lab.experiment import runner
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import simulator
from mlaccel_lab.experiment import workload as wl
from tests import testcase
from tests.unit.experiment import synthetic

MIB = wl.MIB
SIZE = 500 * MIB
BANDWIDTH = 100.0 * MIB


def calib(**changes):
    return dataclasses.replace(calibration.Calibration(
        schedule_seconds={'stock': 0.0, 'plugins': 0.0}, build_seconds=2.0,
        download_bandwidth=BANDWIDTH, volume_copy_bandwidth=50.0 * MIB,
        clone_seconds=0.5, guest_boot_seconds=1.0, cold_start_seconds=3.0,
        preload_seconds=4.0, warm_start_seconds=0.25, step_seconds=0.01,
        hosts=2), **changes)


def make(tasks, hot=False):
    images = (wl.Image('img', SIZE, hot), wl.Image('other', SIZE))
    return wl.Workload({'task': {'entry': 'clip'}}, 0, images, tuple(
        wl.Task(i, at, image, vms, boot, 100)
        for i, (at, image, vms, boot) in enumerate(tasks)))


def run(arm, made, cal=None, seed=0, prefill=False):
    out = simulator.Cluster(cal or calib(), arm, made, seed=seed,
                            prefill=prefill).run()
    records = sorted(out['records'], key=lambda r: r['experiment_task'])
    return records, out['costs']


def vm(record, index=0):
    return record['vms'][index]


def creation(record, index=0):
    return vm(record, index)['timeline']['durations']['creation']


class TestCreation(testcase.TestCase):

    def test_a_cached_image_is_not_downloaded_again(self):
        made = make([(0, 'img', 1, wl.IMAGE), (100, 'img', 1, wl.IMAGE)])
        records, costs = run(arms.STOCK, made, calib(hosts=1))
        self.assertAlmostEqual(2.0 + SIZE / BANDWIDTH, creation(records[0]))
        self.assertAlmostEqual(2.0, creation(records[1]))
        self.assertEqual(SIZE, vm(records[0])['facts']['glance_bytes'])
        self.assertEqual(0, vm(records[1])['facts']['glance_bytes'])
        self.assertEqual(SIZE, costs['glance_bytes'])

    def test_concurrent_downloads_share_glance(self):
        made = make([(0, 'img', 2, wl.IMAGE)])
        records, _costs = run(arms.STOCK, made)
        hosts = {vm(records[0], i)['facts']['host'] for i in range(2)}
        self.assertEqual(2, len(hosts))
        for index in range(2):
            self.assertAlmostEqual(2.0 + 2 * SIZE / BANDWIDTH,
                                   creation(records[0], index))

    def test_stock_copies_every_volume_mirror_copies_once(self):
        made = make([(0, 'img', 1, wl.VOLUME), (100, 'img', 1, wl.VOLUME),
                     (200, 'img', 1, wl.VOLUME)])
        copy = SIZE / (50.0 * MIB)
        stock, stock_costs = run(arms.STOCK, made)
        mirror, mirror_costs = run(arms.only(arms.MIRROR), made)
        self.assertEqual(3, stock_costs['volume_copies'])
        self.assertEqual(1, mirror_costs['volume_copies'])
        self.assertAlmostEqual(2.0 + copy, creation(stock[2]))
        self.assertAlmostEqual(2.0 + copy + 0.5, creation(mirror[0]))
        self.assertAlmostEqual(2.5, creation(mirror[2]))
        self.assertTrue(vm(mirror[0])['facts']['volume_copy'])
        self.assertFalse(vm(mirror[2])['facts']['volume_copy'])
        self.assertTrue(vm(mirror[2])['facts']['volume_clone'])

    def test_cinder_s_cache_clones_after_a_first_copy_of_each_image(self):
        made = make([(0, 'img', 2, wl.VOLUME), (100, 'img', 1, wl.VOLUME),
                     (200, 'other', 1, wl.VOLUME)])
        copy = SIZE / (50.0 * MIB)
        tuned, costs = run(arms.TUNED_STOCK, made, calib(hosts=1))
        # The two first volumes arrive together: one copies and makes the
        # entry under Cinder's lock of the image, the other waits for it
        # and clones it.
        self.assertEqual(2, costs['volume_copies'])
        first, second = sorted(range(2), key=lambda i: creation(tuned[0], i))
        self.assertAlmostEqual(2.0 + copy + 0.5, creation(tuned[0], first))
        self.assertTrue(vm(tuned[0], first)['facts']['volume_copy'])
        self.assertAlmostEqual(2.0 + copy + 0.5 + 0.5,
                               creation(tuned[0], second))
        self.assertTrue(vm(tuned[0], second)['facts']['volume_clone'])
        self.assertFalse(vm(tuned[0], second)['facts']['volume_copy'])
        self.assertAlmostEqual(2.5, creation(tuned[1]))
        self.assertTrue(vm(tuned[1])['facts']['volume_clone'])
        self.assertFalse(vm(tuned[1])['facts']['volume_copy'])
        self.assertAlmostEqual(2.0 + copy + 0.5, creation(tuned[2]))

    def test_hot_images_are_warm_before_the_first_arrival(self):
        """As the reset's untimed warm-up leaves them in a measured run."""
        made = make([(0, 'img', 1, wl.VOLUME), (0, 'img', 1, wl.IMAGE),
                     (0, 'other', 1, wl.VOLUME)], hot=True)
        mirror, costs = run(arms.only(arms.MIRROR), made)
        self.assertAlmostEqual(2.5, creation(mirror[0]))
        self.assertTrue(vm(mirror[0])['facts']['volume_clone'])
        self.assertFalse(vm(mirror[0])['facts']['volume_copy'])
        # A cold image's golden volume is made when first asked for.
        self.assertAlmostEqual(2.0 + SIZE / (50.0 * MIB) + 0.5,
                               creation(mirror[2]))
        self.assertEqual(2, costs['volume_copies'])
        agent, _ = run(arms.only(arms.AGENT), made)
        self.assertAlmostEqual(2.0, creation(agent[1]))
        stock, _ = run(arms.STOCK, made)
        self.assertGreater(creation(stock[1]), 2.0)

    def test_scheduler_plugins_go_where_the_image_is(self):
        made = make([(0, 'img', 1, wl.IMAGE), (100, 'img', 1, wl.IMAGE)])
        misses = {'stock': 0, 'only-scheduler': 0}
        for seed in range(10):
            for arm in (arms.STOCK, arms.only(arms.SCHEDULER)):
                records, _ = run(arm, made, seed=seed)
                misses[arm.name] += vm(records[1])['facts']['glance_bytes'] > 0
        self.assertEqual(0, misses['only-scheduler'])
        self.assertGreater(misses['stock'], 0)

    def test_agent_prefetches_hot_images_to_every_host(self):
        made = make([(600, 'img', 2, wl.IMAGE)], hot=True)
        records, costs = run(arms.only(arms.AGENT), made)
        self.assertEqual(2 * SIZE, costs['glance_bytes'])
        self.assertAlmostEqual(2.0, creation(records[0], 0))
        self.assertAlmostEqual(2.0, creation(records[0], 1))


class TestBuffering(testcase.TestCase):

    def test_cold_start_against_preload_and_warm_start(self):
        made = make([(0, 'img', 1, wl.IMAGE)])
        stock, _ = run(arms.STOCK, made)
        taskd, _ = run(arms.only(arms.TASKD), made)
        buffering = [r[0]['timeline']['durations']['buffering']
                     for r in (stock, taskd)]
        self.assertAlmostEqual(1.0 + 3.0, buffering[0])
        self.assertAlmostEqual(1.0 + 4.0 + 0.25, buffering[1])
        self.assertAlmostEqual(1.0, stock[0]['timeline']['durations'][
            'running'])

    def test_starts_and_copies_share_the_machine_s_cores(self):
        """The all-in-one cloud: one machine's cores for everything."""
        together = make([(0, 'img', 2, wl.IMAGE)])
        cores = calib(cpu_cores=1.0)
        alone, _ = run(arms.STOCK, make([(0, 'img', 1, wl.IMAGE)]), cores)
        self.assertAlmostEqual(
            1.0 + 3.0, alone[0]['timeline']['durations']['buffering'])
        # Two cold starts at once on one core: each at half a core.
        both, _ = run(arms.STOCK, together, cores)
        self.assertAlmostEqual(
            1.0 + 6.0, both[0]['timeline']['durations']['buffering'])
        # Without the shared cores (at scale), each has its own.
        apart, _ = run(arms.STOCK, together)
        self.assertAlmostEqual(
            1.0 + 3.0, apart[0]['timeline']['durations']['buffering'])
        # A copy at 20 CPU-s a GiB: 51 MiB/s on one core, below Glance's
        # 100 and the backend's 1000 MiB/s; without the cores, Glance's.
        volume = make([(0, 'img', 1, wl.VOLUME)])
        fast = calib(volume_copy_bandwidth=1000.0 * MIB)
        cpu_bound = dataclasses.replace(
            fast, cpu_cores=1.0, copy_cpu_seconds_per_gib=20.0)
        self.assertAlmostEqual(2.0 + SIZE / BANDWIDTH,
                               creation(run(arms.STOCK, volume, fast)[0][0]))
        self.assertAlmostEqual(
            2.0 + 20.0 * SIZE / simulator.GIB,
            creation(run(arms.STOCK, volume, cpu_bound)[0][0]))

    def test_the_mirror_fills_at_its_own_bandwidth(self):
        """One pass of a raw image into the golden volume, not two."""
        made = make([(0, 'other', 1, wl.VOLUME)])
        copy = SIZE / (50.0 * MIB)
        fill = SIZE / (80.0 * MIB)
        for cal, seconds in ((calib(), copy),
                             (calib(fill_bandwidth=80.0 * MIB), fill)):
            mirror, _ = run(arms.only(arms.MIRROR), made, cal)
            self.assertAlmostEqual(2.0 + seconds + 0.5, creation(mirror[0]))
        stock, _ = run(arms.STOCK, made, calib(fill_bandwidth=80.0 * MIB))
        self.assertAlmostEqual(2.0 + copy, creation(stock[0]))

    def test_a_task_waits_for_its_launch_s_own_calls(self):
        cal = calib(waiting_seconds={'cold': 0.5, 'launcher': 0.1})
        made = make([(0, 'img', 1, wl.IMAGE)])
        for arm, wait in ((arms.STOCK, 0.5), (arms.only(arms.TASKD), 0.1)):
            records, _ = run(arm, made, cal)
            self.assertAlmostEqual(wait, results.waiting(records[0]))

    def test_a_pooled_vm_starts_at_its_claim(self):
        # The first ask of a key misses and teaches the manager the key.
        made = make([(0, 'img', 1, wl.IMAGE), (300, 'img', 2, wl.IMAGE)])
        records, costs = run(arms.only(arms.POOL), made)
        self.assertFalse(records[0]['vms'][0]['pool'])
        pooled = [v for v in records[1]['vms'] if v['pool']]
        self.assertEqual(1, len(pooled))
        durations = pooled[0]['timeline']['durations']
        self.assertEqual(0.0, durations['scheduling'])
        self.assertEqual(0.0, durations['creation'])
        self.assertAlmostEqual(0.25, durations['buffering'])
        self.assertEqual('img/image', pooled[0]['pool'])
        self.assertGreater(costs['pool_idle_vm_seconds'], 200.0)
        # Its build, boot and preload too.
        self.assertGreater(costs['pool_member_vm_seconds'],
                           costs['pool_idle_vm_seconds'] + 5.0)

    def test_prefilled_pools_serve_a_burst_from_its_first_vm(self):
        # Two tasks at once ask for 5 volume-backed VMs; an image-backed
        # task later for 1. Prefilled to the workload's peaks, every VM
        # comes from a pool; learned from demand alone, the burst's do not.
        made = make([(0.0, 'img', 2, wl.VOLUME), (1.0, 'img', 3, wl.VOLUME),
                     (60.0, 'other', 1, wl.IMAGE)])
        records, costs = run(arms.only(arms.POOL), made, prefill=True)
        self.assertTrue(all(v['pool'] for r in records for v in r['vms']))
        self.assertEqual({'img/volume', 'other/image'},
                         {v['pool'] for r in records for v in r['vms']})
        self.assertGreater(costs['pool_idle_vm_seconds'], 0.0)
        records, _ = run(arms.only(arms.POOL), made)
        self.assertFalse(any(v['pool'] for r in records for v in r['vms']))


class TestLearnedPools(testcase.TestCase):

    def test_pools_are_made_only_for_keys_asked_for_before(self):
        # 'other' is asked for from t=600 only: no pool of it may exist
        # before, nor may the tasks before t=600 fare differently from
        # those of a workload without the later ones.
        early = [(30.0 * i, 'img', 1, wl.IMAGE) for i in range(20)]
        late = [(600.0 + i, 'other', 2, wl.IMAGE) for i in range(6)]
        made_at = {}
        cluster = simulator.Cluster(calib(), arms.only(arms.POOL),
                                    make(early + late))
        real = simulator._Pool

        def spy(spec, bounds=None):
            made_at.setdefault(spec.image_id, cluster.env.now)
            return real(spec, bounds)

        with mock.patch.object(simulator, '_Pool', spy):
            out = cluster.run()
        self.assertLess(made_at['img'], 600.0)
        self.assertGreater(made_at.get('other', float('inf')), 600.0)
        alone, _ = run(arms.only(arms.POOL), make(early))
        both = sorted(out['records'], key=lambda r: r['experiment_task'])
        self.assertEqual([r['vms'] for r in alone],
                         [r['vms'] for r in both[:len(early)]])
        self.assertTrue(any(v['pool'] for r in alone for v in r['vms']))

    def test_foresight_changes_the_early_tasks(self):
        # The check above would catch prefill's foresight.
        early = [(0.0, 'img', 1, wl.IMAGE)]
        late = [(600.0 + i, 'img', 2, wl.IMAGE) for i in range(6)]
        alone, _ = run(arms.only(arms.POOL), make(early), prefill=True)
        both, _ = run(arms.only(arms.POOL), make(early + late),
                      prefill=True)
        self.assertNotEqual(alone[0]['vms'], both[0]['vms'])

    def test_the_budget_bounds_the_members(self):
        made = make([(10.0 * i, image, 2, wl.IMAGE) for i in range(40)
                     for image in ('img', 'other')])
        pooled, idle = {}, {}
        for members in (0, 1, 8):
            out = simulator.Cluster(
                calib(), arms.only(arms.POOL), made,
                pool_options=simulator.learned_options(
                    budget_members=members)).run()
            pooled[members] = sum(bool(v['pool']) for r in out['records']
                                  for v in r['vms'])
            idle[members] = out['costs']['pool_member_vm_seconds']
        self.assertEqual(0, pooled[0])
        self.assertEqual(0, idle[0])
        self.assertGreater(pooled[1], 0)
        self.assertGreater(pooled[8], pooled[1])
        # One member alive at most: never more member time than the run.
        self.assertLessEqual(idle[1], 400.0 + 60.0)

    def test_refills_build_in_the_background_a_few_at_a_time(self):
        # As the shipped manager's: a refill builds at most
        # refill_parallelism members at once, and no pool's builds wait
        # for another's.
        made = make([(10.0 * i, image, 2, wl.IMAGE) for i in range(40)
                     for image in ('img', 'other')])
        cluster = simulator.Cluster(
            calib(), arms.only(arms.POOL), made,
            pool_options=simulator.learned_options(
                budget_members=8, refill_parallelism=1))
        builds = []
        real = simulator.Cluster._member

        def member(self, pool, *slots):
            yield from real(self, pool, *slots)
            (_host, observed, _facts, name), began, ready = pool.idle[-1]
            # A refill's builds are asked for in the same round.
            builds.append((observed['requested'], ready, name, began))

        with mock.patch.object(simulator.Cluster, '_member', member):
            cluster.run()
        self.assertEqual({'img/image', 'other/image'},
                         {build[2] for build in builds})

        def overlap(one, other):
            return one[0] < other[1] and other[0] < one[1]

        refills = {build[2:] for build in builds}
        self.assertLess(len(refills), len(builds))   # some of several
        for refill in refills:
            own = sorted(b for b in builds if b[2:] == refill)
            self.assertFalse(any(overlap(*pair)
                                 for pair in zip(own, own[1:])), own)
        self.assertTrue(any(overlap(one, other) for one in builds
                            for other in builds if one[2] != other[2]))

    def test_the_rounds_keep_a_phase_of_their_own(self):
        # The manager's rounds do not start with the workload's clock.
        made = make([(0.0, 'img', 1, wl.IMAGE)])
        firsts = set()
        for seed in range(4):
            cluster = simulator.Cluster(
                calib(), arms.only(arms.POOL), made, seed=seed,
                pool_options=simulator.learned_options(interval=5.0))
            with mock.patch.object(simulator.learning.Policy, 'targets',
                                   autospec=True, return_value=({}, {})
                                   ) as targets:
                cluster.run()
            first = targets.call_args_list[0][0][2]
            self.assertGreaterEqual(first, 0.0)
            self.assertLess(first, 5.0)
            firsts.add(first)
        self.assertEqual(4, len(firsts))

    def test_stated_options_override_the_shipped_ones(self):
        options = simulator.learned_options(learn_max_size=3, interval=60.0)
        self.assertEqual(3, options.learn_max_size)
        self.assertEqual(60.0, options.interval)
        self.assertEqual(8, simulator.learned_options().budget_members)
        self.assertTrue(options.learn)

    def test_flavors_are_part_of_the_key(self):
        made = make([(10.0 * i, 'img', 1, wl.IMAGE) for i in range(30)])

        def pooled(flavor_of):
            out = simulator.Cluster(calib(), arms.only(arms.POOL), made,
                                    flavor_of=flavor_of).run()
            return {v['pool'] for r in out['records'] for v in r['vms']
                    if v['pool']}

        self.assertEqual({'img/image'}, pooled(None))
        self.assertEqual({'img/image/f0', 'img/image/f1'},
                         pooled(lambda task: 'f%d' % (task.index % 2)))


class TestSimulatedRunner(testcase.TestCase):

    def test_results_match_the_schema_and_are_seeded(self):
        made = synthetic.fixed_workload()
        chosen = arms.ablation_arms()
        first = runner.execute(simrunner.SimulatedRunner(calib()), made,
                               chosen, progress=False)
        jsonschema.validate(first, results.SCHEMA)
        self.assertFalse(first['measured'])
        self.assertEqual(4 * len(chosen), len(first['runs']))
        again = runner.execute(simrunner.SimulatedRunner(calib()), made,
                               chosen, progress=False)
        self.assertEqual(first['runs'][5]['costs'],
                         again['runs'][5]['costs'])

    def test_a_short_runner_is_refused_and_closed(self):
        closed = []

        class Short(simrunner.SimulatedRunner):
            def run(self, arm, workload, done):
                out = super().run(arm, workload, done)
                out['records'] = out['records'][1:]
                return out

            def close(self):
                closed.append(True)

        error = self.assertRaises(
            ValueError, runner.execute, Short(calib()),
            synthetic.fixed_workload(), arms.main_arms(), progress=False)
        self.assertIn('expected one for each', str(error))
        self.assertEqual([True], closed)
