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

"""GoldenImageWeigher in Cinder's scheduler, with two mirror backends.

Two cinder-volume services (two backends) publish their golden images on a
real state bus (tooz's file driver); cinder-scheduler loads the weigher by
name from its entry-point namespace and reads the reports through the
report cache. Cinder's AllocatedCapacityWeigher alone sends each request to
the backend with less allocated, alternating; with the weigher, requests for
an image follow its golden volume.
"""

import time

from cinder import context
from cinder import objects
# Registers the scheduler's options (scheduler_default_weighers).
from cinder.scheduler import host_manager  # noqa: F401
from cinder.volume import volume_utils

from mlaccel.cinder import weigher
from tests import fixtures as mlaccel_fixtures
from tests.functional.cinder import base

MIB = base.MIB


class GoldenImageWeigherTest(base.MirrorTestBase):
    WEIGHERS = ['AllocatedCapacityWeigher', 'GoldenImageWeigher']

    def _get_flags(self):
        f = super()._get_flags()
        f['scheduler_default_weighers'] = {'v': self.WEIGHERS}
        f['scheduler_default_filters'] = {
            'v': ['AvailabilityZoneFilter', 'CapacityFilter']}
        return f

    def setUp(self):
        super().setUp()
        self.useFixture(mlaccel_fixtures.ProcessReportCache(
            cls=weigher.BackendReportCache))
        self.second = self.start_service('volume', host='second')
        self.mirrors = {self.volume.host: self.driver.mirror,
                        'second': self.second.manager.driver.mirror}
        self.wait_backends(2)

    def wait_backends(self, n):
        """Until the scheduler knows ``n`` backends with capacity."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.scheduler.manager.request_service_capabilities(
                context.get_admin_context())
            states = self.scheduler.manager.driver.host_manager\
                .service_states
            if len(states) >= n:
                return
            time.sleep(0.2)
        self.fail('the scheduler does not know %d backends' % n)

    def backend_of(self, volume_id):
        volume = objects.Volume.get_by_id(context.get_admin_context(),
                                          volume_id)
        return volume_utils.extract_host(volume.host, 'host')

    def wait_report(self, backend, image_id):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            held = weigher.get_cache().snapshot().get(backend)
            if held is not None and image_id in held.golden_images:
                return
            time.sleep(0.1)
        self.fail('no report of %s holding %s' % (backend, image_id))

    def test_requests_follow_the_golden_volume(self):
        image = self.images.add(base.image_bytes('weigh', 2 * MIB))
        first = self.wait(self.create(image['id']))
        self.assertEqual('available', first['status'])
        golden = self.backend_of(first['id'])
        self.wait_report(golden, image['id'])
        other = self.images.add(base.image_bytes('other', 2 * MIB))
        placed = []
        for _ in range(4):
            volume = self.wait(self.create(image['id']))
            self.assertEqual('available', volume['status'])
            self.assertHoldsImage(volume['id'], image['id'])
            placed.append(self.backend_of(volume['id']))
        self.assertEqual([golden] * 4, placed)
        self.assertEqual(1, self.images.downloads[image['id']])
        # An image golden nowhere goes where capacity says: the backend
        # with less allocated, not the golden one.
        volume = self.wait(self.create(other['id']))
        self.assertNotEqual(golden, self.backend_of(volume['id']))


class WithoutWeigherTest(GoldenImageWeigherTest):
    """The control: without the weigher, requests alternate."""

    WEIGHERS = ['AllocatedCapacityWeigher']

    def test_requests_follow_the_golden_volume(self):
        image = self.images.add(base.image_bytes('weigh', 2 * MIB))
        backends = [self.backend_of(self.wait(self.create(image['id']))['id'])
                    for _ in range(3)]
        self.assertEqual(2, len(set(backends)))
