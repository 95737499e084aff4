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

import dataclasses

from mlaccel_lab.testing.aio import layout
from tests import testcase

#: Linux's default net.ipv4.ip_local_port_range.
EPHEMERAL = range(32768, 61000)


class TestPorts(testcase.TestCase):

    def test_no_port_the_kernel_may_give_a_client_socket(self):
        used = layout.Ports().all()
        # RabbitMQ's distribution port comes with the AMQP one, and every
        # etcd member's client and peer ports with the first's.
        self.assertEqual(len(dataclasses.astuple(layout.Ports())) + 1
                         + 2 * layout.ETCD_MEMBERS - 1, len(used))
        self.assertEqual(len(used), len(set(used)))
        self.assertEqual([], [p for p in used if p in EPHEMERAL])
        self.assertTrue(all(1024 < p < 65536 for p in used))

    def test_a_cloud_keeps_the_ports_it_was_brought_up_with(self):
        old = dict(dataclasses.asdict(layout.Settings()),
                   ports={'db': 43306, 'neutron': 49696})
        settings = layout.Settings.from_dict(old)
        self.assertEqual(43306, settings.ports.db)
        self.assertEqual(49696, settings.ports.neutron)
        self.assertEqual(layout.Ports().nova, settings.ports.nova)


class TestControllers(testcase.TestCase):

    def test_one_controller_runs_on_redis(self):
        lay = layout.Layout('/nonexistent', layout.Settings())
        self.assertFalse(lay.etcd)
        self.assertTrue(lay.statebus_url.startswith('redis://'))
        self.assertEqual(lay.statebus_url, lay.agents_bus_url)
        self.assertEqual([], list(lay.extra_controllers()))

    def test_each_controller_on_its_own_etcd_member(self):
        lay = layout.Layout('/nonexistent', layout.Settings(controllers=2))
        ports = lay.ports
        self.assertTrue(lay.etcd)
        self.assertEqual([2], list(lay.extra_controllers()))
        urls = [lay.statebus_url, lay.controller_bus_url(2),
                lay.agents_bus_url]
        self.assertEqual(['etcd3+http://127.0.0.1:%d?api_version=v3&'
                          'timeout=10' % ports.etcd_client(m)
                          for m in range(layout.ETCD_MEMBERS)], urls)
