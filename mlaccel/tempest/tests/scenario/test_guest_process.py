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

"""A server's guest process starts with the server and ends with it."""

from tempest.common import waiters
from tempest import config
from tempest.lib import decorators

from mlaccel.tempest import guests
from mlaccel.tempest.tests import base

CONF = config.CONF


def guest_pids(server_id):
    """Pids of local processes started as the guest of ``server_id``."""
    return guests.with_environ('MLACCEL_INSTANCE_UUID', server_id)


class GuestProcessTest(base.MlaccelAdminTest):
    """Needs the test virt driver on computes of this host."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.mlaccel.same_host_as_computes:
            raise cls.skipException('guest processes are not visible here')

    @decorators.idempotent_id('c3d0e8a4-7f4e-4d7c-8a6e-2b9f0c1d5e01')
    def test_delete_leaves_no_guest_process(self):
        server = self.create_test_server(
            user_data=base.cloud_config(CONF.mlaccel.guest_command),
            wait_until='ACTIVE')
        pids = guest_pids(server['id'])
        self.assertEqual(1, len(pids), 'one guest process expected')
        self.servers_client.delete_server(server['id'])
        waiters.wait_for_server_termination(self.servers_client,
                                            server['id'])
        self.assertEqual([], guest_pids(server['id']))
