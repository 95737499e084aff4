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

RESULT = re.compile(r'^RESULT total_reduction_pct=(\S+) '
                    r'overhead_reduction_pct=(\S+) running_share_pct=(\S+) '
                    r'sim_total_reduction_pct_1k=(\S+)$')


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


class TestReport(testcase.TestCase):

    def test_result_line(self):
        measured = {'reductions': {'mlaccel': {
            'total': (31.25, 20.0, 40.0), 'overhead': (80.0, 70.0, 90.0)}},
            'running_share_pct': 55.55}
        at_scale = {'reductions': {'mlaccel': {
            'total': (25.04, 24.0, 26.0), 'overhead': None}}}
        self.assertEqual(
            'RESULT total_reduction_pct=31.2 overhead_reduction_pct=80.0 '
            'running_share_pct=55.5 sim_total_reduction_pct_1k=25.0',
            report.result_line(measured, at_scale))
        self.assertEqual(
            'RESULT total_reduction_pct=nan overhead_reduction_pct=nan '
            'running_share_pct=nan sim_total_reduction_pct_1k=nan',
            report.result_line())

    def test_summary_text_states_the_precondition(self):
        results = synthetic.results()
        summary = report.summarize(results)
        text = report.format_summary(summary, 'synthetic')
        self.assertIn('PRECONDITION running share of the stock total', text)
        self.assertIn(': ok', text)
        results['workload']['shape']['task']['min_running_share'] = 0.9
        text = report.format_summary(report.summarize(results), 'synthetic')
        self.assertIn('NOT MET', text)
        json.dumps(summary)

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
        count = workload.load_shape()['tasks']['count']
        self.assertTrue(out.startswith('seed 3: %d tasks' % count), out)
        status, out, _err = _main(['workload', '--seed', '3',
                                   '--calibration', self.measured])
        self.assertEqual(0, status)
        self.assertRegex(out.splitlines()[-1],
                         r'^simulated stock overhead [0-9.]+ s a task; '
                         r'running share [0-9.]+ %% with %d steps; '
                         % workload.load_shape()['task']['steps'] +
                         r'[0-9]+ steps for 50 %$')

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
            '--tasks', '40', '--output', output, '--no-progress'])
        self.assertEqual(0, status)
        self.assertIn('validation PASSED', out)
        self.assertIn('Simulated at 20 hosts, 40 tasks', out)
        found = RESULT.match(out.splitlines()[-1])
        self.assertIsNotNone(found, out.splitlines()[-1])
        self.assertEqual('nan', found.group(1))
        self.assertNotEqual('nan', found.group(3))
        self.assertNotEqual('nan', found.group(4))
        for name in ('calibration.json', 'own-size.json', 'at-scale.json',
                     'at-scale-summary.json', 'at-scale-stages.png',
                     'at-scale-first-step.png'):
            self.assertTrue(os.path.exists(os.path.join(output, name)), name)
        at_scale = results_mod.load(os.path.join(output, 'at-scale.json'))
        self.assertFalse(at_scale['measured'])

    def _workload(self, name, **task):
        shape = workload.load_shape()
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
        self.assertNotEqual('nan', found.group(1))
        self.assertEqual('nan', found.group(4))
        written = os.path.join(output, 'results.json')
        self.assertEqual(4, results_mod.load(written)['workload']['seed'])
        status, again, _err = _main(['report', written])
        self.assertEqual(0, status)
        self.assertEqual(out.splitlines()[-1], again.splitlines()[-1])

    def test_an_unmet_precondition_is_exit_status_1(self):
        path = self._workload('short.yaml', min_running_share=0.99)
        status, out, _err = _main([
            'run', 'sim', '--calibration', self.measured, '--workload', path,
            '--output', os.path.join(self.directory, 'short'),
            '--no-simulate', '--no-progress'])
        self.assertEqual(1, status)
        self.assertIn('>= 99 %: NOT MET', out)
        self.assertTrue(out.splitlines()[-1].startswith('RESULT '))


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
