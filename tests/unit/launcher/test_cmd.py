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

"""Argument handling of ``mlaccel launch``."""

import io
import os
import subprocess
import sys

import fixtures

from mlaccel.cmd import launch

from tests import testcase

REQUIRED = ['--image', 'img', '--flavor', 'm1.small', '--task', 'a.b:c']


class ParserTest(testcase.TestCase):

    def _parse(self, *extra):
        return launch.build_parser().parse_args(REQUIRED + list(extra))

    def test_defaults(self):
        args = self._parse()
        self.assertEqual(1, args.count)
        self.assertEqual('none', args.network)
        self.assertEqual({}, args.task_args)
        self.assertFalse(args.keep_servers)
        self.assertEqual({'callback_host': None, 'taskd_port': None,
                          'poll_interval': None, 'max_parallelism': None},
                         launch._options(args))

    def test_options_passed_on(self):
        args = self._parse('--count', '3', '--task-args', '{"steps": 5}',
                           '--listen', '[::]:7800', '--callback-host', 'h',
                           '--preload', 'torch, json', '--keep-servers',
                           '--max-parallelism', '2')
        self.assertEqual(3, args.count)
        self.assertEqual({'steps': 5}, args.task_args)
        self.assertTrue(args.keep_servers)
        options = launch._options(args)
        self.assertEqual(('::', 7800),
                         (options['listen_host'], options['listen_port']))
        self.assertEqual(['torch', 'json'], options['preload'])
        self.assertEqual(2, options['initial_parallelism'])

    def test_bad_input_is_a_usage_error(self):
        for extra in (['--task-args', '[1]'], ['--task-args', '{'],
                      ['--count', '0'], ['--listen', 'nohost'],
                      ['--taskd-port', '70000'], ['--taskd-port', '-1'],
                      ['--listen', 'h:65536'],
                      ['--timeout', '-1']):
            stderr = io.StringIO()
            self.useFixture(
                fixtures.MonkeyPatch('sys.stderr', stderr))
            error = self.assertRaises(SystemExit, self._parse, *extra)
            self.assertEqual(2, error.code, extra)

    def test_cli_needs_subcommand(self):
        stderr = io.StringIO()
        self.useFixture(
            fixtures.MonkeyPatch('sys.stderr', stderr))
        self.assertEqual(2, launch.cli(['frobnicate']))
        self.assertEqual(2, launch.cli([]))
        lines = stderr.getvalue().splitlines()
        self.assertEqual(2, len(lines))
        self.assertIn("unknown command 'frobnicate'", lines[0])
        self.assertIn('mlaccel --help', lines[1])

    def test_help(self):
        stdout = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout))
        for argv in (['--help'], ['-h'], ['help']):
            self.assertEqual(0, launch.cli(argv))
        self.assertIn('usage: mlaccel launch', stdout.getvalue())
        self.assertIn('Commands:', stdout.getvalue())

    def test_progress_line(self):
        out = io.StringIO()
        launch.print_progress({'elapsed': 1.25, 'launch_id': 'abc',
                               'created': 2, 'count': 3, 'active': 1,
                               'ready': 1, 'running': 0, 'done': 0,
                               'limit': 4}, out)
        self.assertEqual('[    1.2s] launch abc: created 2/3, active 1, '
                         'ready 1, running 0, done 0 (creations in flight '
                         '<= 4)\n', out.getvalue())


class BadInputTest(testcase.TestCase):
    """The console script as a user runs it: one line, an exit status.

    Every case fails before any connection to a cloud is made.
    """

    def _run(self, *argv):
        tmp = self.useFixture(fixtures.TempDir()).path
        env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
        env.update(HOME=tmp, OS_CLOUD='nowhere')
        result = subprocess.run(
            [sys.executable, '-c', 'import sys; from mlaccel.cmd.launch '
             'import cli; sys.exit(cli())'] + list(argv),
            capture_output=True, text=True, cwd=tmp, env=env, timeout=120)
        self.assertEqual([], os.listdir(tmp), 'created on disk')
        return result

    def _conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'launcher.conf')
        with open(path, 'w') as stream:
            stream.write(text)
        return path

    def assertOneLine(self, result, status, *words):
        self.assertEqual(status, result.returncode, result.stderr)
        self.assertEqual(1, len(result.stderr.splitlines()), result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        for word in words:
            self.assertIn(word, result.stderr)

    def test_bad_config_files(self):
        cases = [
            ('/nonexistent/launcher.conf', ('nonexistent',)),
            (self._conf('[mlaccel_launcher\nx = 1\n'), ('launcher.conf',)),
            (self._conf('garbage without section\n'), ('launcher.conf',)),
            (self._conf('[mlaccel_launcher]\npoll_interval = abc\n'),
             ('poll_interval',)),
            (self._conf('[mlaccel_launcher]\nmax_parallelism = 0\n'),
             ('max_parallelism',)),
        ]
        for path, words in cases:
            result = self._run('launch', *REQUIRED, '--config-file', path)
            self.assertOneLine(result, 2, 'mlaccel launch:', *words)

    def test_bad_task_fields(self):
        result = self._run('launch', '--image', 'i', '--flavor', 'f',
                           '--task', 'no spaces allowed')
        self.assertOneLine(result, 2, 'entry')

    def test_unwritable_output(self):
        for path in ('/nonexistent/record.json', '/'):
            result = self._run('launch', *REQUIRED, '--output', path)
            self.assertOneLine(result, 2, '--output')

    def test_help_and_usage(self):
        result = self._run('--help')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('mlaccel launch', result.stdout)
        self.assertOneLine(self._run(), 2, 'mlaccel --help')
        result = self._run('launch', '--help')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('--config-file', result.stdout)
