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

"""Run a benchmark briefly, as its smoke tests do; read its RESULT line."""

import os
import subprocess
import sys

TIMEOUT = 600


def result_line(testcase, name, *argv, env=None):
    """Run the benchmark; return its RESULT fields as ``{key: float}``."""
    proc = subprocess.run(
        [sys.executable, '-m', 'mlaccel_lab.bench', name, *argv],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=TIMEOUT, env=dict(os.environ, **(env or {})))
    lines = proc.stdout.rstrip().splitlines()
    testcase.assertEqual(0, proc.returncode, '\n'.join(lines[-30:]))
    testcase.assertTrue(lines and lines[-1].startswith('RESULT '),
                        '\n'.join(lines[-30:]))
    fields = dict(item.split('=', 1) for item in lines[-1].split()[1:])
    return {key: float(value) for key, value in fields.items()}
