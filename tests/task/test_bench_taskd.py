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

"""A short smoke run of the task daemon's benchmark, which needs torch.

Not a measurement: it checks that ``python -m mlaccel_lab.bench taskd``
runs end to end at a small size and ends with its ``RESULT`` line.
"""

import testtools

from tests.benchsmoke import result_line


class TaskdBenchSmokeTest(testtools.TestCase):

    def test_taskd(self):
        fields = result_line(self, 'taskd', '--repeat', '1', '--steps', '1',
                             '--ready-repeat', '1')
        self.assertIn('warm_start_speedup', fields)
        self.assertIn('preload_s', fields)
