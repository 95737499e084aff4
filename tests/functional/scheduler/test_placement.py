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

"""Where real Nova places servers with mlaccel's filter and weighers.

Before each case :meth:`~base.NovaHarnessBase._load_hosts` boots a large
server on host1 and a small one on host2, so the stock weighers (free RAM,
vCPUs, disk) pick host3; host1 is the one they like least.
"""

import collections
import json
import os
import shutil
import time
from urllib import parse

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from tests.functional.scheduler import base


class StockPlacementTest(base.NovaHarnessBase):
    """The control: nova's own configuration, no mlaccel at all."""

    def test_stock_weighers_pick_the_emptiest_host(self):
        self._load_hosts()
        self.assertEqual(base.STOCK_HOST, self._boot(base.WANTED))


class PlacementTest(base.PluginTestBase):
    """mlaccel configured as the README says, on a file state bus."""

    def _stop_bus(self):
        """Make the bus unreadable: its directory becomes a plain file."""
        path = parse.urlparse(self.bus.url).path
        shutil.rmtree(path)
        with open(path, 'w') as f:
            f.write('not a state bus\n')
        self.addCleanup(os.unlink, path)

    def _assert_stock(self, image=base.WANTED):
        self.assertEqual(base.STOCK_HOST, self._boot(image))

    def test_server_lands_where_its_image_is_cached(self):
        self._load_hosts()
        usage = {h: self._get_provider_usages(
            self._get_provider_uuid_by_host(h))['MEMORY_MB'] for h in
            base.HOSTS}
        self.assertGreater(usage['host1'], usage[base.STOCK_HOST])
        self._publish('host1', cached_images=[base.WANTED])
        self._publish('host2')
        self._publish('host3')
        reports = self._wait_for_reports()
        self.assertIn(base.WANTED, reports.get('host1').cached_images)

        self.assertEqual('host1', self._boot(base.WANTED))
        # An image no host holds goes where the stock weighers send it.
        self._assert_stock(base.OTHER)

    def test_burst_spreads_away_from_a_host_at_its_build_limit(self):
        self._load_hosts()
        self._publish(base.STOCK_HOST, builds_in_flight=2, build_limit=2)
        for host in ('host1', 'host2'):
            self._publish(host, build_limit=2)
        self._wait_for_reports()

        body = self._build_server(image_uuid=base.WANTED,
                                  flavor_id=self.small_flavor,
                                  networks='none')
        body.update(min_count=4, max_count=4, return_reservation_id=True)
        reservation = self.api.post_server({'server': body})
        servers = self.api.get_servers(
            search_opts={'reservation_id': reservation['reservation_id']})
        self.assertEqual(4, len(servers))
        hosts = collections.Counter(
            self._wait_for_state_change(s, 'ACTIVE')['OS-EXT-SRV-ATTR:host']
            for s in servers)
        # None on the full host; the others take no more than their limit
        # of the burst at once.
        self.assertEqual({'host1': 2, 'host2': 2}, dict(hosts))

        # With a free slot the stock favourite takes builds again.
        self._publish(base.STOCK_HOST, builds_in_flight=1, build_limit=2)
        self._wait_for_reports()
        self._assert_stock(base.OTHER)

    def test_flavor_may_ignore_build_slots(self):
        self._load_hosts()
        # The stock favourite holds the image and builds fast, but all its
        # build slots are taken.
        self._publish(base.STOCK_HOST, cached_images=[base.WANTED],
                      builds_in_flight=5, build_limit=2, build_throughput=1.0)
        self._wait_for_reports()
        self.assertNotEqual(base.STOCK_HOST, self._boot(base.WANTED))

        # A flavor that says "ignore" may queue there.
        flavor = self._create_flavor(
            memory_mb=512, vcpu=1, disk=1, ephemeral=0,
            extra_spec={'mlaccel:build_slots': 'ignore'})
        self.assertEqual(base.STOCK_HOST,
                         self._boot(base.WANTED, flavor=flavor))

    def test_missing_reports_leave_stock_placement(self):
        self._load_hosts()
        reports = self._wait_for_reports()
        self.assertTrue(self.cache.healthy)
        self.assertEqual(0, len(reports))
        self._assert_stock()

    def test_stale_reports_leave_stock_placement(self):
        self._load_hosts()
        max_age = mlaccel_conf.CONF.mlaccel_statebus.report_max_age
        old = time.time() - 2 * max_age
        self._publish('host1', timestamp=old, cached_images=[base.WANTED])
        self._publish('host2', timestamp=old, cached_images=[base.WANTED])
        self._publish(base.STOCK_HOST, timestamp=old, builds_in_flight=9,
                      build_limit=1)
        reports = self._wait_for_reports()
        self.assertEqual(3, len(reports))  # read, but not used
        self.assertEqual([None] * 3, [reports.get(h) for h in base.HOSTS])
        self._assert_stock()

    def test_malformed_reports_leave_stock_placement(self):
        self._load_hosts()
        valid = hostreport.HostReport(
            host='host1', timestamp=time.time(),
            cached_images=frozenset([base.WANTED]))
        future = dict(valid.to_dict(), host='host2', version='2.0')
        self._publish_raw('host1', b'\x00{garbage')
        self._publish_raw('host2', json.dumps(future).encode())
        # host3 speaking for host1.
        self._publish_raw(base.STOCK_HOST, hostreport.encode(valid))
        reports = self._wait_for_reports()
        self.assertTrue(self.cache.healthy)
        self.assertEqual(0, len(reports))
        self._assert_stock()

    def test_stopped_bus_leaves_stock_placement(self):
        self._load_hosts()
        self._publish('host1', cached_images=[base.WANTED, base.OTHER])
        self._wait_for_reports()
        self.assertEqual('host1', self._boot(base.WANTED))

        self._stop_bus()
        reports = self._wait_for_unhealthy_bus()
        self.assertEqual(0, len(reports))
        self._assert_stock(base.OTHER)


class RedisPlacementTest(PlacementTest):
    """The same cases on a real redis-server."""

    backend = 'redis'

    def _stop_bus(self):
        self.bus.server.kill()
        # Bring it back before the publishers stop: tooz's heartbeat thread
        # retries a lost Redis forever and coordinator.stop() joins it.
        self.addCleanup(self.bus.server.start)
