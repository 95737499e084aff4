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

"""The agent measures the builds of Nova's in-process compute service.

Real parts: Nova's API, conductor, scheduler, placement and a compute on
the fake hypervisor (``nova.tests.functional``); Nova's versioned
notifications, which the harness keeps in a test notifier, are also sent
by a real oslo.messaging notifier on oslo.messaging's in-memory transport,
where the agent's listener consumes them from a pool of its own; a real
file state bus. Run with stestr or ``python -m testtools.run`` and
``OS_NOVA_DISABLE_EVENTLET_PATCHING=1`` (native threads) or ``=0``.
"""

import os
import sys
import time

import fixtures
from nova.tests.functional import integrated_helpers

from mlaccel.agent import inventory
from mlaccel.agent import novaconf
from mlaccel.agent import service
from tests import fixtures as mlaccel_fixtures
from tests.functional import cell_lock
from tests.functional.records import test_boundaries

# Before any harness is made: see tests.functional.cell_lock.
cell_lock.install()

TRANSPORT_URL = 'fake:/'
IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'


class AgentBuildsTest(integrated_helpers.ProviderUsageBaseTestCase):

    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.flags(notification_format='versioned', group='notifications')
        super().setUp()
        test_boundaries.tee_notifications(self, TRANSPORT_URL)
        self._start_compute('host1')

        root = self.useFixture(fixtures.TempDir()).path
        nova_conf = os.path.join(root, 'nova.conf')
        with open(nova_conf, 'w') as f:
            f.write('[DEFAULT]\nhost = host1\nstate_path = %s\n'
                    'transport_url = %s\ncontrol_exchange = nova\n'
                    % (root, TRANSPORT_URL))
        self.settings = novaconf.load([nova_conf])
        conf = self.useFixture(mlaccel_fixtures.Conf())
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(conf.conf,
                                                             'file'))
        conf.set('mlaccel_agent', scan_interval=0.2, initial_build_limit=2,
                 hot_images=[IMAGE])
        conf.set('mlaccel_statebus',
                 host_key_file=self.bus.host_key_file('host1'))
        self.agent = service.Agent(conf.conf, settings=self.settings)
        self.agent.start()
        self.addCleanup(self.agent.stop)
        self.assertTrue(self.agent.listener.connected.wait(30))

    def on_bus(self):
        cache = self.bus.cache()
        cache.refresh()
        return cache.snapshot().get('host1')

    def wait_for(self, predicate, timeout=60):
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            time.sleep(0.1)
        return predicate()

    def test_builds_measured_and_reported(self):
        servers = [self._create_server(image_uuid=IMAGE, networks='none',
                                       name='agent-%d' % i)
                   for i in range(3)]
        for server in servers:
            self._wait_for_state_change(server, 'ACTIVE')
        tracker = self.agent.builds
        self.assertTrue(self.wait_for(
            lambda: tracker.completed == 3 and tracker.in_flight == 0))
        # The cache learns the image of the builds; the report carries the
        # measured builds once they change.
        os.makedirs(self.settings.cache_dir, exist_ok=True)
        with open(os.path.join(self.settings.cache_dir,
                               inventory.cache_name(IMAGE)), 'wb') as f:
            f.write(b'disk')
        report = self.wait_for(
            lambda: (self.on_bus() or None) and
            IMAGE in self.on_bus().cached_images and self.on_bus())
        self.assertTrue(report)
        self.assertEqual(0, report.builds_in_flight)
        self.assertGreaterEqual(report.build_limit, 1)
        self.assertGreater(report.build_throughput, 0)
        for server in servers:
            self._delete_server(server)
