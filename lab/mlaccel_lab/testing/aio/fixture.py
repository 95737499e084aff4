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

"""A fixture for functional tests on a running all-in-one cloud.

For tests that want its real services (Glance, RabbitMQ, Nova, ...).
"""

import fcntl
import os
import unittest

import fixtures

from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import layout as aio_layout


class RunningCloud(fixtures.Fixture):
    """The cloud whose base directory ``$MLACCEL_AIO_BASE`` names.

    The test is skipped when the variable is unset and fails when the
    cloud it names is not running. Gives ``layout``, ``cloud`` (ids of the
    test image and flavors) and ``connect()`` (an admin openstacksdk
    connection).

    :param exclusive: the test restarts parts of the cloud (RabbitMQ, a
        compute, an agent): it runs alone. Tests share the cloud through a
        lock in its ``run`` directory, held shared by the others, so
        parallel test workers wait for each other rather than break.
    """

    def __init__(self, exclusive=False):
        super().__init__()
        self.exclusive = exclusive

    def setUp(self):
        # Raised before the fixture starts: fixtures would wrap a SkipTest
        # raised from _setUp into a SetupError, failing the test.
        if not os.environ.get(aio_layout.BASE_ENV):
            raise unittest.SkipTest('no all-in-one cloud: set %s to the base '
                                    'directory of one that is up'
                                    % aio_layout.BASE_ENV)
        super().setUp()

    def _setUp(self):
        base = os.environ[aio_layout.BASE_ENV]
        self.layout = aio_layout.Layout(base)
        self._lock(self.layout.path('run', 'tests.lock'))
        down = [name for name, up in cloud.status(self.layout).items()
                if not up]
        if down or not os.path.exists(self.layout.cloud_file):
            raise AssertionError('the cloud in %s is not up (down: %s)'
                                 % (base, down or 'everything'))
        self.cloud = self.layout.load_cloud()

    def _lock(self, path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.addCleanup(os.close, fd)
        fcntl.flock(fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        self.addCleanup(fcntl.flock, fd, fcntl.LOCK_UN)

    def connect(self):
        conn = cloud.connect(self.layout)
        self.addCleanup(conn.close)
        return conn
