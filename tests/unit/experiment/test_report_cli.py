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

"""The report, the charts and the command line, end to end."""

import contextlib
import io
import json
import os
import re

import fixtures
import yaml

from mlaccel_lab.experiment import charts
from mlaccel_lab.experiment import cli
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner as runner_mod
from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import workload
from tests import testcase
from tests.unit.experiment import synthetic

RESULT = re.compile(r'^RESULT overhead_reduction_pct=(\S+) '
                    r'saved_s_per_task=(\S+) hit_rate_pct=(\S+) '
                    r'idle_vm_s_per_saved_s=(\S+) '
                    r'total_reduction_pct_at_trace_lengths=(\S+) '
                    r'sim_overhead_reduction_pct_1k=(\S+)$')


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


class TestReport(testcase.TestCase):

    def test_result_line(self):
        measured = {'reductions': {'mlaccel': {
            'total': (31.25, 20.0, 40.0), 'overhead': (80.0, 70.0, 90.0)}},
            'saved_s_per_task': {'mlaccel': (25.04, 20.0, 30.0)},
            'hit_rate_pct': {'mlaccel': 41.66}, 'member_s_per_saved_s': 1.234,
            'at_trace_lengths': {'mlaccel': 4.44}}
        at_scale = {'reductions': {'mlaccel': {
            'total': (25.04, 24.0, 26.0), 'overhead': (60.0, 59.0, 61.0)}}}
        self.assertEqual(
            'RESULT overhead_reduction_pct=80.0 saved_s_per_task=25.0 '
            'hit_rate_pct=41.7 idle_vm_s_per_saved_s=1.23 '
            'total_reduction_pct_at_trace_lengths=4.4 '
            'sim_overhead_reduction_pct_1k=60.0',
            report.result_line(measured, at_scale))
        self.assertEqual(
            'RESULT overhead_reduction_pct=nan saved_s_per_task=nan '
            'hit_rate_pct=nan idle_vm_s_per_saved_s=nan '
            'total_reduction_pct_at_trace_lengths=nan '
            'sim_overhead_reduction_pct_1k=nan', report.result_line())

    def test_cpu_seconds_by_group(self):
        groups = report.cpu_groups({
            'total': 100.0, 'guests': 40.0, 'nova-api': 5.0,
            'nova-compute-c1': 3.0, 'cinder-volume': 20.0, 'keystone': 4.0,
            'mlaccel-agent-c1': 1.0, 'mariadb': 6.0})
        self.assertEqual({'total': 100.0, 'guests': 40.0, 'nova': 8.0,
                          'cinder': 20.0, 'keystone': 4.0, 'mlaccel': 1.0,
                          'other': 27.0}, groups)
        results = synthetic.results(seed=1)
        for run in results['runs']:
            run['costs'][results_mod.CPU_COSTS] = {'total': 50.0,
                                                   'guests': 20.0}
        text = report.format_summary(report.summarize(results), 'x')
        self.assertIn('CPU seconds per run, by part', text)
        self.assertRegex(text, r'\nstock +50\.0 +20\.0 +0\.0 .* 30\.0\n')
        self.assertNotIn('CPU seconds', report.format_summary(
            report.summarize(synthetic.results(seed=1)), 'x'))

    def test_summary_holds_for_any_task_length(self):
        results = synthetic.results()
        summary = report.summarize(results)
        text = report.format_summary(summary, 'synthetic')
        self.assertNotIn('running share', text)
        self.assertIn('saved s/task', text)
        self.assertIn('cluster bootstrap', text)
        for arm, found in summary['at_lengths'].items():
            # The longer the training, the smaller the share saved (or
            # lost).
            shares = [abs(found[length]) for length in report.LENGTHS]
            self.assertEqual(sorted(shares, reverse=True), shares, arm)
        json.dumps(summary)

    def test_total_at_a_length_is_the_seconds_saved_over_stock_total(self):
        results = synthetic.results()
        rows = {r['key']: r for r in results_mod.task_rows(results, 'stock')}
        arm = 'without-pool'
        other = {r['key']: r for r in results_mod.task_rows(results, arm)}
        keys = sorted(set(rows) & set(other))
        stock = sum(rows[k]['overhead'] for k in keys) / len(keys)
        saved = sum(rows[k]['overhead'] - other[k]['overhead']
                    for k in keys) / len(keys)
        found = report.at_lengths(results, arm, lengths=(100.0,))
        self.assertAlmostEqual(100.0 * saved / (stock + 100.0), found[100.0])

    def test_charts_are_pngs(self):
        results = synthetic.results()
        directory = self.useFixture(fixtures.TempDir()).path
        paths = charts.write(results, report.summarize(results), directory,
                             'exp', 'synthetic')
        self.assertEqual(2, len(paths))
        for path in paths:
            with open(path, 'rb') as stream:
                head = stream.read(8)
            self.assertEqual(b'\x89PNG\r\n\x1a\n', head)
            self.assertGreater(os.path.getsize(path), 5000)


class TestCommandLine(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.measured = os.path.join(self.directory, 'measured.json')
        schema.dump(synthetic.results(), self.measured)

    def test_workload(self):
        status, out, _err = _main(['workload', '--seed', '3'])
        self.assertEqual(0, status)
        count = workload.load_shape()['stream']['tasks']
        self.assertTrue(out.startswith('seed 3: %d tasks' % count), out)
        self.assertIn('open-loop stream', out.splitlines()[0])
        self.assertIn('in the trace', out)

    def test_a_bad_workload_is_one_line_and_status_2(self):
        path = os.path.join(self.directory, 'bad.yaml')
        with open(path, 'w') as stream:
            stream.write('version: 2\n')
        status, out, err = _main(['workload', '--workload', path])
        self.assertEqual(2, status)
        self.assertEqual(1, len(err.splitlines()))
        self.assertIn('bad.yaml', err)

    def test_simulate_validates_then_runs_at_scale(self):
        output = os.path.join(self.directory, 'sim')
        status, out, _err = _main([
            'simulate', '--calibration', self.measured, '--hosts', '20',
            '--tasks', '40', '--output', output, '--no-progress',
            '--records'])
        self.assertEqual(0, status)
        self.assertIn('validation PASSED', out)
        self.assertIn('Simulated at 20 hosts, 40 tasks', out)
        found = RESULT.match(out.splitlines()[-1])
        self.assertIsNotNone(found, out.splitlines()[-1])
        # The synthetic results have no mlaccel arm; at scale it runs.
        self.assertEqual('nan', found.group(1))
        self.assertNotEqual('nan', found.group(6))
        for name in ('calibration.json', 'own-size.json',
                     'at-scale-distributions.json',
                     'at-scale-records.jsonl.gz',
                     'at-scale-summary.json', 'at-scale-stages.png',
                     'at-scale-first-step.png'):
            self.assertTrue(os.path.exists(os.path.join(output, name)), name)
        self.assertIn('Assumptions at scale', out)
        self.assertIn('Sensitivity at scale (SIMULATED', out)
        records = os.path.join(output, 'at-scale-records.jsonl.gz')
        status, again, _err = _main(['report', self.measured,
                                     '--at-scale', records])
        self.assertEqual(0, status)
        self.assertEqual(out.splitlines()[-1], again.splitlines()[-1])

    def _workload(self, name, **task):
        shape = synthetic.fixed_shape()
        shape['task'].update(task)
        path = os.path.join(self.directory, name)
        with open(path, 'w') as stream:
            yaml.safe_dump(shape, stream)
        return path

    def test_run_on_the_simulator_then_report(self):
        output = os.path.join(self.directory, 'run')
        status, out, _err = _main([
            'run', 'sim', '--calibration', self.measured, '--seed', '4',
            '--workload', self._workload('long.yaml', steps=40000),
            '--output', output, '--no-simulate', '--no-progress'])
        self.assertEqual(0, status)
        self.assertIn('SIMULATED: not measured', out)
        found = RESULT.match(out.splitlines()[-1])
        self.assertIsNotNone(found, out.splitlines()[-1])
        self.assertNotEqual('nan', found.group(1))
        self.assertEqual('nan', found.group(6))
        written = os.path.join(output, 'results.json')
        self.assertEqual(4, results_mod.load(written)['workload']['seed'])
        status, again, _err = _main(['report', written])
        self.assertEqual(0, status)
        self.assertEqual(out.splitlines()[-1], again.splitlines()[-1])


class _CloudDown(runner_mod.Runner):
    """A runner whose cloud never comes up, as a failed bring-up ends."""

    kind = 'down'
    closed = []

    def prepare(self, workload):
        raise runner_mod.RunnerError('the all-in-one cloud did not come up: '
                                     'keystone exited')

    def reset(self, arm):
        raise AssertionError('no run without a cloud')

    def run(self, arm, workload, done):
        raise AssertionError('no run without a cloud')

    def close(self):
        self.closed.append(True)


class TestRunnerFailure(testcase.TestCase):

    def test_a_cloud_that_does_not_come_up_is_one_line_and_closed(self):
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel_lab.experiment.cli.RUNNERS',
            dict(cli.RUNNERS, down=__name__ + ':_CloudDown')))
        output = self.useFixture(fixtures.TempDir()).path
        status, out, err = _main(['run', 'down', '--output', output,
                                  '--no-simulate', '--no-progress'])
        self.assertEqual(1, status)
        self.assertEqual(['error: the all-in-one cloud did not come up: '
                          'keystone exited'], err.splitlines())
        self.assertNotIn('RESULT', out)
        self.assertEqual([True], _CloudDown.closed)
