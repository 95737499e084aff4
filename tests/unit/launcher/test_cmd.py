"""Argument handling of ``mlaccel launch``."""

import io

import fixtures

import testtools

from mlaccel.cmd import launch

REQUIRED = ['--image', 'img', '--flavor', 'm1.small', '--task', 'a.b:c']


class ParserTest(testtools.TestCase):

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
        self.assertIn('mlaccel launch', stderr.getvalue())

    def test_progress_line(self):
        out = io.StringIO()
        launch.print_progress({'elapsed': 1.25, 'launch_id': 'abc',
                               'created': 2, 'count': 3, 'active': 1,
                               'ready': 1, 'running': 0, 'done': 0,
                               'limit': 4}, out)
        self.assertEqual('[    1.2s] launch abc: created 2/3, active 1, '
                         'ready 1, running 0, done 0 (creations in flight '
                         '<= 4)\n', out.getvalue())
