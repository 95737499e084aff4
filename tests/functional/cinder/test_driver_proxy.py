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

"""The mirror-volume driver, a proxy, under Cinder's volume manager."""

from cinder.volume import driver as cinder_driver

from mlaccel_lab.testing import filevolume
from tests.functional.cinder import base


class ProxyFormTest(base.MirrorTestBase):

    def test_proxy_forwards_to_the_backend(self):
        self.assertIsInstance(self.driver, cinder_driver.ProxyVD)
        backend = self.driver._get_driver()
        self.assertIsInstance(backend, filevolume.FileVolumeDriver)
        # What the volume manager reads, the backend's own values.
        self.assertTrue(self.driver.initialized)
        self.assertIs(backend.configuration, self.driver.configuration)
        stats = self.driver.get_volume_stats()
        self.assertTrue(stats['mlaccel_mirror'])
        self.assertEqual('mlaccel', stats['vendor_name'])
