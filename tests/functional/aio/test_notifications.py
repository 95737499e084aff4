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

"""The launcher's notification listener against the cloud's own RabbitMQ.

Nova's services on the all-in-one cloud send versioned notifications (the
harness configures them as ``mlaccel-config enable`` does); the listener of
:mod:`mlaccel.nova.notifications` hears them on a queue of its own. Needs a
running cloud (``python -m mlaccel_lab.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise.
"""

import kombu
from oslo_config import cfg
import testtools

from mlaccel.nova import notifications as events
from mlaccel_lab.testing.aio import fixture

#: Seconds a notification may take to arrive once the server is ACTIVE.
ARRIVAL_TIMEOUT = 30


class NotificationSourceTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.aio = self.useFixture(fixture.RunningCloud())
        self.conn = self.aio.connect()
        self.conf = cfg.ConfigOpts()
        self.conf([], default_config_files=[])

    def queue_exists(self, name):
        url = self.aio.layout.transport_url.replace('rabbit://', 'amqp://')
        with kombu.Connection(url) as connection:
            try:
                connection.default_channel.queue_declare(queue=name,
                                                         passive=True)
            except connection.channel_errors:
                return False
            return True

    def test_two_listeners_each_hear_a_server_s_boundaries(self):
        url = self.aio.layout.transport_url
        first = events.NotificationSource(url, self.conf).start()
        self.addCleanup(first.stop)
        second = events.NotificationSource(url, self.conf).start()
        self.addCleanup(second.stop)
        self.assertTrue(self.queue_exists(first.pool))

        server = self.conn.compute.create_server(
            name='notification-test', image_id=self.aio.cloud['image_id'],
            flavor_id=self.aio.cloud['flavor_id'], networks='none')
        self.addCleanup(self.conn.compute.wait_for_delete, server,
                        interval=0.5, wait=120)
        self.addCleanup(self.conn.compute.delete_server, server,
                        ignore_missing=True)
        self.conn.compute.wait_for_server(server, interval=0.5, wait=180)

        for source in (first, second):
            self.assertTrue(source.events.wait(
                lambda: source.times(server.id)['active'] is not None,
                ARRIVAL_TIMEOUT))
        times = first.times(server.id)
        # Neither pool took a message from the other.
        self.assertEqual(times, second.times(server.id))
        self.assertEqual(1, times['builds'])
        self.assertIsNone(times['failed'])
        self.assertLess(times['scheduled'], times['build_started'])
        self.assertLess(times['build_started'], times['active'])
        # Microsecond timestamps, not whole seconds.
        self.assertTrue(any(t % 1 for t in (
            times['scheduled'], times['build_started'], times['active'])))

        # A stopped listener leaves no queue collecting notifications.
        first.stop()
        self.assertFalse(self.queue_exists(first.pool))
        self.assertTrue(self.queue_exists(second.pool))
