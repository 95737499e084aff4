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

"""The all-in-one cloud's step clock: what bring-up and resets print."""

import contextlib
import io
from unittest import mock

from mlaccel_lab.testing.aio import cloud
from tests import testcase


class ClockTest(testcase.TestCase):

    def clock(self, quiet, times):
        with mock.patch.object(cloud.time, 'monotonic',
                               side_effect=times):
            made = cloud.Clock(quiet=quiet)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                made.mark('servers')
                made.mark('volume cache')
        return made, out.getvalue()

    def test_steps_in_order_each_since_the_last(self):
        made, _ = self.clock(True, [100.0, 100.25, 104.0])
        self.assertEqual({'servers': 0.2, 'volume cache': 3.8}, made.steps)
        self.assertEqual('servers 0.2 s, volume cache 3.8 s', made.summary())

    def test_quiet_prints_nothing_loud_prints_each_step(self):
        self.assertEqual('', self.clock(True, [0.0, 1.0, 2.0])[1])
        printed = self.clock(False, [0.0, 1.0, 2.0])[1].splitlines()
        self.assertEqual(['[aio +  1.0s] servers (1.0 s)',
                          '[aio +  2.0s] volume cache (1.0 s)'], printed)
