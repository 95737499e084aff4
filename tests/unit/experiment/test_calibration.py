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

"""Calibration from records the simulator did not make, and validation."""

import dataclasses
import os
import tempfile
from unittest import mock

import fixtures

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import calibration
from mlaccel_lab.experiment import production
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import simulator
from mlaccel_lab.experiment import validation
from mlaccel_lab.experiment import workload
from tests import testcase
from tests.unit.experiment import synthetic

COSTS = synthetic.COSTS
GIB = simulator.GIB


def _cpu_run(arm, copied_gib, filled_gib, cinder, other, seconds=100.0):
    """A kept run: a VM whose volume was copied, one cloned; CPU table."""
    def vm(image, gib, copied):
        return {'pool': None, 'facts': {
            'boot': 'volume', 'image': image, 'volume_copy': copied,
            'image_bytes': int(gib * GIB)}}

    record = {'arrival': 1000.0, 'timeline': {
        'total': seconds, 'events': {'requested': 1000.0}},
        'vms': [vm('copied', copied_gib, True),
                vm('cloned', filled_gib, False)]}
    return {'arm': arm, 'warmup': False, 'records': [record], 'costs': {
        results_mod.CPU_COSTS: {'cinder-volume': cinder, 'guests': 30.0,
                                'total': cinder + 30.0 + other}}}


class TestFitCores(testcase.TestCase):
    """The shared cores and a copy's CPU, from the runs' CPU tables."""

    def results(self, runner='aio'):
        # cinder-volume: 5 CPU-s a run whatever it does, 8 a GiB copied,
        # 3 a GiB the mirror filled (its clones' image, once a run); the
        # other services 50 CPU-s in each run's 100 s.
        return {'runner': runner, 'preconditions': {'cpus': 2},
                'arms': [{'name': 'stock', 'mechanisms': []},
                         {'name': 'tuned', 'mechanisms': []},
                         {'name': 'mirror', 'mechanisms': ['mirror']}],
                'runs': [_cpu_run('stock', 5.0, 0.0, 45.0, 50.0),
                         _cpu_run('tuned', 1.0, 0.0, 13.0, 50.0),
                         _cpu_run('tuned', 1.0, 0.0, 13.0, 50.0),
                         _cpu_run('mirror', 0.0, 2.0, 11.0, 50.0),
                         _cpu_run('mirror', 0.0, 1.0, 8.0, 50.0)]}

    def test_copy_and_fill_cpu_the_rest_leaves_the_cores(self):
        sources = {}
        cores, copy, fill = calibration._fit_cpu(self.results(), sources)
        self.assertAlmostEqual(8.0, copy)
        self.assertAlmostEqual(3.0, fill)
        # 2 cores less (50 + 5) CPU-s in 100 s, in every run.
        self.assertAlmostEqual(2.0 - 0.55, cores)
        self.assertIn('least squares over 5 runs',
                      sources['copy_cpu_seconds_per_gib'])

    def test_not_modelled_without_one_machine_or_two_volumes(self):
        sources = {}
        self.assertEqual((None, None, None), calibration._fit_cpu(
            self.results(runner='simulator'), sources))
        self.assertIn('not modelled', sources['cpu_cores'])
        same = self.results()
        same['runs'] = [_cpu_run('stock', 1.0, 0.0, 13.0, 50.0)] * 3
        self.assertEqual((None, None, None), calibration._fit_cpu(same, {}))
        busy = self.results()
        for run in busy['runs']:
            run['costs'][results_mod.CPU_COSTS]['total'] += 200.0
        self.assertEqual((None, None, None), calibration._fit_cpu(busy, {}))

    def test_waiting_by_launch_path(self):
        made = synthetic.results(seed=1)
        for run in made['runs']:
            path = calibration.launch_path(
                results_mod.mechanisms(made)[run['arm']])
            for rec in run['records']:
                rec['arrival'] = rec['timeline']['events']['requested'] - (
                    0.2 if path == calibration.LAUNCHER else 0.1)
        found = calibration.fit(made).waiting_seconds
        self.assertAlmostEqual(0.1, found[calibration.COLD], places=5)
        self.assertAlmostEqual(0.2, found[calibration.LAUNCHER], places=5)


class TestFit(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.results = synthetic.results(seed=1)
        self.fitted = calibration.fit(self.results)

    def test_recovers_the_costs_behind_the_records(self):
        fitted = self.fitted
        for found, true in (
                (fitted.build_seconds, COSTS['build']),
                (fitted.download_bandwidth, COSTS['download_bandwidth']),
                (fitted.volume_copy_bandwidth, COSTS['copy_bandwidth']),
                (fitted.cold_start_seconds, COSTS['cold_start']),
                (fitted.preload_seconds, COSTS['preload']),
                (fitted.warm_start_seconds, COSTS['warm']),
                (fitted.step_seconds, COSTS['step']),
                (fitted.schedule_seconds['stock'], COSTS['schedule_stock']),
                (fitted.schedule_seconds['plugins'],
                 COSTS['schedule_plugins'])):
            self.assertAlmostEqual(true, found, delta=0.1 * true)
        self.assertEqual(2, fitted.hosts)
        self.assertEqual(0.0, fitted.guest_boot_seconds)
        self.assertIn('refinement', fitted.sources)

    def test_round_trips_through_a_calibration_file(self):
        fd, path = tempfile.mkstemp(suffix='.json')
        os.close(fd)
        self.addCleanup(os.unlink, path)
        schema.dump(self.fitted.to_dict(), path)
        loaded, results = calibration.load(path)
        self.assertIsNone(results)
        self.assertEqual(self.fitted, loaded)

    def test_a_bad_calibration_file_is_one_line(self):
        data = self.fitted.to_dict()
        data['build_seconds'] = -1
        error = self.assertRaises(schema.InvalidFile,
                                  calibration.Calibration.from_dict, data,
                                  'cal.json')
        self.assertIn('cal.json: build_seconds:', str(error))
        self.assertNotIn('\n', str(error))

    def test_downloads_of_one_size_fall_back_to_a_rough_estimate(self):
        # Build and bandwidth cannot be told apart when every image-backed
        # VM downloaded as much: a first estimate for the refinement.
        results = synthetic.results(seed=1)
        for run in results['runs']:
            for record in run['records']:
                for vm in record['vms']:
                    if vm['facts']['boot'] == workload.IMAGE:
                        vm['facts']['glance_bytes'] = 1 << 30
        fitted = calibration.fit(results)
        self.assertIn('rough estimate', fitted.sources['build_seconds'])
        self.assertGreater(fitted.download_bandwidth, 0)
        self.assertGreaterEqual(fitted.build_seconds, 0)

    def test_records_without_downloads_cannot_fit_the_bandwidth(self):
        results = synthetic.results(seed=1)
        for run in results['runs']:
            for record in run['records']:
                for vm in record['vms']:
                    vm['facts']['glance_bytes'] = 0
        error = self.assertRaises(calibration.CalibrationError,
                                  calibration.fit, results)
        self.assertIn('download', str(error))

    def test_records_without_copies_cannot_fit_the_copy_bandwidth(self):
        results = synthetic.results(arms=[arms.only(arms.MIRROR)])
        for run in results['runs']:
            for record in run['records']:
                for vm in record['vms']:
                    vm['facts']['volume_copy'] = False
        error = self.assertRaises(calibration.CalibrationError,
                                  calibration.fit, results)
        self.assertIn('volume_copy_bandwidth', str(error))


class TestValidate(testcase.TestCase):

    def test_reproduces_the_table_it_was_fitted_on(self):
        checked = validation.validate(synthetic.results(seed=2))
        self.assertTrue(checked.passed, checked.format())
        judged = {(c.arm, c.field) for c in checked.judged}
        for arm in synthetic.ARMS:
            self.assertIn((arm.name, 'total'), judged)
            self.assertIn((arm.name, 'creation'), judged)
        self.assertIn(('stock', 'scheduling'),
                      {(c.arm, c.field) for c in checked.cells})
        # Copies shown measured and simulated, each arm that made any.
        self.assertTrue(checked.copies)
        for measured, simulated in checked.copies.values():
            self.assertGreater(measured[0] + simulated[0], 0)

    def test_the_simulated_manager_learns_with_the_measured_options(self):
        measured = synthetic.results(seed=2)
        measured['preconditions']['pool_options'] = {'interval': 1.0}
        made = []
        real = simrunner.SimulatedRunner

        def runner(*args, **kwargs):
            made.append(kwargs['pool_options'])
            return real(*args, **kwargs)

        with mock.patch.object(simrunner, 'SimulatedRunner', runner):
            validation.validate(measured)
        self.assertEqual(1.0, made[0].interval)
        self.assertTrue(made[0].learn)

    def test_holds_for_another_workload_of_the_same_shape(self):
        measured = synthetic.results(seed=5, workload_seed=99)
        checked = validation.validate(measured)
        self.assertTrue(checked.passed, checked.format())

    def test_fails_on_a_cloud_unlike_its_calibration(self):
        fitted = calibration.fit(synthetic.results(seed=2))
        other = synthetic.results(seed=2, costs={
            'download_bandwidth': 4 * COSTS['download_bandwidth'],
            'cold_start': 3 * COSTS['cold_start']})
        checked = validation.validate(other, fitted)
        self.assertFalse(checked.passed)
        worst = checked.worst
        self.assertIn(worst.field,
                      ('creation', 'buffering', validation.MEDIAN))
        self.assertGreater(abs(worst.error), validation.TOLERANCE)
        self.assertIn('validation FAILED', checked.format())


class TestCopies(testcase.TestCase):
    """Full volume copies a run, their time, the others in flight."""

    def row(self, run, start, end, copy=True, pooled=False, arm='stock'):
        return {'arm': arm, 'run': (run, arm), 'pooled': pooled,
                'facts': {'volume_copy': copy},
                'events': {'scheduled': start, 'active': end}}

    def copies(self, rows):
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel_lab.experiment.results.vm_rows',
            lambda results: rows))
        return validation.copies({})

    def test_a_known_case(self):
        found = self.copies([
            # Run 0: two copies overlap, a third runs alone, an image VM.
            self.row(0, 0.0, 10.0), self.row(0, 5.0, 15.0),
            self.row(0, 20.0, 25.0), self.row(0, 0.0, 30.0, copy=False),
            # Run 1: a copy, and a pooled VM that overlaps it.
            self.row(1, 12.0, 16.0), self.row(1, 0.0, 30.0, pooled=True),
            # An arm that copied nothing.
            self.row(0, 0.0, 3.0, copy=False, arm='mlaccel')])
        self.assertEqual({'stock'}, set(found))
        per_run, seconds, in_flight = found['stock']
        self.assertEqual(2.0, per_run)
        self.assertEqual((10 + 10 + 5 + 4) / 4, seconds)
        self.assertEqual(0.5, in_flight)

    def test_copies_of_other_runs_do_not_overlap(self):
        found = self.copies([self.row(0, 0.0, 10.0),
                             self.row(1, 0.0, 10.0)])
        self.assertEqual((1.0, 10.0, 0.0), found['stock'])

    def test_shown_beside_the_cells(self):
        checked = validation.Validation([], copies={
            'stock': ((9.0, 13.9, 2.1), (9.0, 4.5, 1.1))})
        self.assertIn('full volume copies (not judged)', checked.format())
        self.assertIn('measured  9.0  13.90 s  2.10', checked.format())
        self.assertIn('simulated  9.0   4.50 s  1.10', checked.format())


class TestMediansByKind(testcase.TestCase):
    """A pooled arm's overhead is bimodal: hits and misses judged apart."""

    def rows(self, hits, misses):
        return [{'overhead': o, 'hit': True} for o in hits] + [
            {'overhead': o, 'hit': False} for o in misses]

    def cells(self, measured_rows, simulated_rows):
        measured, simulated = {}, {}
        rows = {id(measured): measured_rows, id(simulated): simulated_rows}
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel_lab.experiment.results.task_rows',
            lambda results, arm: rows[id(results)]))
        return {c.field: c for c in validation._medians_by_kind(
            measured, simulated, 'mlaccel')}

    def test_each_mode_is_judged_by_its_own_median(self):
        # 58 % hits measured, 50 % simulated: the mixtures' medians are
        # 0.4 s and 6.2 s, yet each mode is simulated within 10 %.
        cells = self.cells(self.rows([0.4] * 7, [12.0] * 5),
                           self.rows([0.44] * 6, [11.0] * 6))
        hits = cells[validation.MEDIAN_OF[True]]
        misses = cells[validation.MEDIAN_OF[False]]
        self.assertTrue(hits.judged and misses.judged)
        self.assertTrue(hits.within(validation.TOLERANCE))
        self.assertTrue(misses.within(validation.TOLERANCE))
        self.assertAlmostEqual(0.1, hits.error)

    def test_a_mode_off_by_more_than_the_tolerance_fails(self):
        cells = self.cells(self.rows([0.4] * 7, [12.0] * 5),
                           self.rows([2.0] * 6, [12.0] * 6))
        self.assertFalse(cells[validation.MEDIAN_OF[True]].within(
            validation.TOLERANCE))

    def test_a_mode_of_few_tasks_is_shown_not_judged(self):
        cells = self.cells(self.rows([0.4] * 7, [12.0] * 2),
                           self.rows([0.4] * 6, [12.0] * 6))
        self.assertFalse(cells[validation.MEDIAN_OF[False]].judged)


class TestProduction(testcase.TestCase):

    def test_stated_parameters_replace_the_site_dependent_costs(self):
        fitted = calibration.fit(synthetic.results(seed=2))
        stated = production.load()
        scaled = production.for_production(fitted, stated)
        self.assertEqual(1000, scaled.hosts)
        self.assertEqual(10e9 / 8, scaled.download_bandwidth)
        self.assertEqual(100e9 / 8, scaled.glance)
        self.assertEqual(75.0, scaled.guest_boot_seconds)
        self.assertAlmostEqual(
            fitted.preload_seconds / fitted.cold_start_seconds,
            scaled.preload_seconds / scaled.cold_start_seconds)
        self.assertAlmostEqual(
            fitted.schedule_seconds['plugins']
            / fitted.schedule_seconds['stock'],
            scaled.schedule_seconds['plugins']
            / scaled.schedule_seconds['stock'])
        self.assertEqual(fitted.warm_start_seconds,
                         scaled.warm_start_seconds)
        self.assertEqual(0.36, scaled.step_seconds)
        self.assertEqual('stated (production)',
                         scaled.sources['build_seconds'])

    def test_the_all_in_one_s_shared_cores_stay_behind(self):
        fitted = dataclasses.replace(
            calibration.fit(synthetic.results(seed=2)), cpu_cores=1.4,
            copy_cpu_seconds_per_gib=8.0, fill_cpu_seconds_per_gib=3.0)
        fitted = dataclasses.replace(
            fitted, fill_bandwidth=1.5 * fitted.volume_copy_bandwidth)
        scaled = production.for_production(fitted, production.load())
        self.assertIsNone(scaled.cpu_cores)
        self.assertIn('not modelled at scale', scaled.sources['cpu_cores'])
        self.assertAlmostEqual(1.5, scaled.fill_bandwidth
                               / scaled.volume_copy_bandwidth)
        self.assertEqual(8e9 / 8, scaled.volume_copy_bandwidth)
        self.assertIn(('cpu_cores', 'none', scaled.sources['cpu_cores']),
                      production.assumptions(production.load(), scaled))

    def test_production_workload_is_the_trace_stream_at_1k_hosts(self):
        stated = production.load()
        made = production.workload(stated)
        stream = stated['workload']['stream']
        self.assertEqual(stream['tasks'], len(made.tasks))
        # The trace's cluster has 1,523 nodes: its arrivals per host.
        self.assertAlmostEqual(1523 / stated['hosts'], stream['time_scale'])
        self.assertLessEqual(max(t.vms for t in made.tasks),
                             stream['max_vms'])
        self.assertGreater(len(made.images), 3)
        self.assertEqual(40, len(production.workload(stated,
                                                     tasks=40).tasks))
        self.assertEqual(30, len(production.workload(stated, tasks=40,
                                                     images=30).images))
