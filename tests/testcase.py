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

"""The base class of mlaccel's unit tests."""

import os

import fixtures
import testtools


class TestCase(testtools.TestCase):
    """A unit test with a deadline.

    ``OS_TEST_TIMEOUT`` seconds (tox sets it) bound each test: a hung test
    fails with a traceback instead of stalling the run. Nothing else
    changes: temporary files stay where the tests put them, since some are
    read by processes running as another user.
    """

    def setUp(self):
        super().setUp()
        timeout = int(os.environ.get('OS_TEST_TIMEOUT') or 0)
        if timeout > 0:
            self.useFixture(fixtures.Timeout(timeout, gentle=True))
