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

"""The all-in-one CI job names its failed tests, from a real stestr run."""

import contextlib
import io
import os
import sys
import textwrap

import fixtures

from mlaccel_lab.testing.aio import ci
from tests import testcase

_SUITE = textwrap.dedent('''\
    import unittest


    class T(unittest.TestCase):
        def test_fine(self):
            pass

        def test_broken(self):
            self.assertEqual(1, 2, 'one is not two')
    ''')


class RunSuiteTest(testcase.TestCase):

    def _run(self):
        top = self.useFixture(fixtures.TempDir()).path
        os.mkdir(os.path.join(top, 'suite'))
        for name, text in (('__init__.py', ''), ('test_it.py', _SUITE)):
            with open(os.path.join(top, 'suite', name), 'w') as f:
                f.write(text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = ci.run_suite('mlaccel tempest', [
                sys.executable, '-m', 'stestr', '--test-path', 'suite',
                '--top-dir', '.', 'run'], top, dict(os.environ))
        return result, out.getvalue()

    def test_failed_test_and_its_reason_are_recorded(self):
        result, _ = self._run()
        self.assertEqual((1, 1), (result['passed'], result['failed']))
        self.assertNotEqual(0, result['exit_code'])
        self.assertEqual(['suite.test_it.T.test_broken'], result['failing'])
        self.assertTrue(any('AssertionError' in r and 'one is not two' in r
                            for r in result['reasons']), result['reasons'])

    def test_summary_ends_with_the_failed_tests(self):
        result, _ = self._run()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ci.print_summary([result], 1.0, None)
        lines = out.getvalue().splitlines()
        job = [i for i, line in enumerate(lines)
               if line.startswith('aio job:')]
        self.assertEqual(1, len(job))
        tail = lines[job[0] + 1:]
        self.assertEqual('aio failed: suite.test_it.T.test_broken', tail[0])
        self.assertTrue(tail[1].startswith('aio why: '), tail)
