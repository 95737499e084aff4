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

"""A second server of an image lands on the host that cached the image."""

from tempest import config
from tempest.lib import decorators

from mlaccel.tempest.tests import base

CONF = config.CONF


@decorators.serial
class ImageLocalityTest(base.MlaccelAdminTest):
    """Later servers of an image go where the image is cached.

    Across two computes, mlaccel's weigher sends them to the host whose
    image cache holds the image, against the stock RAM, CPU and disk
    weighers, which spread them to the emptier host.

    The image is large enough (128 MiB) that fetching it takes longer than
    the hosts' measured build times differ by: with a tiny image the cost
    model rightly prefers whichever host builds faster, and the two fake
    computes of one machine measure build times up to a second apart. The
    class runs alone (``serial``), so that no other test's builds queue on
    either host meanwhile.
    """

    IMAGE_SIZE = 128 * 1024 * 1024

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if CONF.compute.min_compute_nodes < 2:
            raise cls.skipException('needs at least two compute hosts')

    @decorators.idempotent_id('6a7f1c11-2d4b-4b7e-9c55-1f7d2e0b4a01')
    def test_second_server_lands_where_image_is_cached(self):
        image_id = self.create_image(size=self.IMAGE_SIZE)
        first = self.create_test_server(image_id=image_id,
                                        wait_until='ACTIVE')
        host = self.get_host_for_server(first['id'])
        self.wait_for_report(host, image_id)
        for _ in range(2):
            server = self.create_test_server(image_id=image_id,
                                             wait_until='ACTIVE')
            self.assertEqual(host, self.get_host_for_server(server['id']))
