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

"""The notification listener on a real oslo.messaging transport.

The transport is oslo.messaging's in-process ``fake://`` driver: the real
listener, pool, dispatcher and executor, without a RabbitMQ.
"""

import time

import oslo_messaging

from mlaccel.agent import builds
from mlaccel.agent import hot
from mlaccel.agent import notifications
from tests.unit.agent import base

UUIDS = ['00000000-0000-0000-0000-%012d' % i for i in range(5)]


def payload(uuid, host, image='image-1'):
    return {'nova_object.name': 'InstanceCreatePayload',
            'nova_object.namespace': 'nova',
            'nova_object.version': '1.12',
            'nova_object.data': {'uuid': uuid, 'host': host,
                                 'image_uuid': image}}


class ListenerTest(base.NodeTestCase):

    # Nova sets its control exchange in code; here in the file.
    NOVA_CONF = 'transport_url = fake://\ncontrol_exchange = nova\n'

    def setUp(self):
        super().setUp()
        self.tracker = builds.BuildTracker(initial=4)
        self.images = []
        self.demand = hot.Demand(window=3600.0, min_builds=2)
        self.listener = notifications.Listener(
            self.settings, 'mlaccel-agent-cmp1', self.tracker,
            on_image=self.images.append, on_demand=self.demand.seen)
        self.listener.start()
        self.addCleanup(self.listener.stop)
        self.assertTrue(self.listener.connected.wait(30))

    def notifier(self, host):
        return oslo_messaging.Notifier(
            self.listener.transport, publisher_id='nova-compute:%s' % host,
            driver='messagingv2', topics=['versioned_notifications'])

    def wait_for(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            time.sleep(0.01)
        return predicate()

    def test_builds_of_this_host_are_measured(self):
        mine, other = self.notifier('cmp1'), self.notifier('cmp2')
        mine.info({}, 'instance.create.start', payload(UUIDS[0], 'cmp1'))
        mine.info({}, 'instance.create.start', payload(UUIDS[1], 'cmp1'))
        other.info({}, 'instance.create.start', payload(UUIDS[2], 'cmp2'))
        self.assertTrue(self.wait_for(lambda: self.tracker.in_flight == 2))
        mine.info({}, 'instance.create.end', payload(UUIDS[0], 'cmp1'))
        mine.error({}, 'instance.create.error', payload(UUIDS[1], 'cmp1'))
        self.assertTrue(self.wait_for(lambda: self.tracker.in_flight == 0))
        self.assertIsNotNone(self.tracker.median_duration)
        # The images in demand on this host, for the inventory's names.
        self.assertEqual(['image-1'] * 4, self.images)

    def test_builds_anywhere_make_demand(self):
        mine, other = self.notifier('cmp1'), self.notifier('cmp2')
        other.info({}, 'instance.create.start',
                   payload(UUIDS[0], 'cmp2', 'popular'))
        other.info({}, 'instance.create.start',
                   payload(UUIDS[1], 'cmp2', 'popular'))
        other.info({}, 'instance.create.end',
                   payload(UUIDS[1], 'cmp2', 'popular'))
        mine.info({}, 'instance.create.start',
                  payload(UUIDS[2], 'cmp1', 'rare'))
        # Starts count, on any host; ends do not.
        self.assertTrue(self.wait_for(
            lambda: self.demand.hot() == ['popular'] and
            self.tracker.in_flight == 1))
        # Only this host's builds are measured.
        self.assertEqual(['rare'], self.images)

    def test_unparsable_notification_logged_and_skipped(self):
        mine = self.notifier('cmp1')
        mine.info({}, 'instance.create.start', {'no': 'object'})
        mine.info({}, 'instance.create.start', 'not even a dict')
        mine.info({}, 'instance.create.start', payload(UUIDS[3], 'cmp1'))
        self.assertTrue(self.wait_for(lambda: self.tracker.in_flight == 1))
        self.assertEqual(2, self.listener.endpoint.skipped)
        self.assertIn('Skipped a instance.create.start notification',
                      self.log.output)


class DemandTest(base.NodeTestCase):

    def test_window_and_threshold(self):
        demand = hot.Demand(window=100.0, min_builds=2)
        for when, image in ((1000.0, 'a'), (1010.0, 'a'), (1020.0, 'b'),
                            (1090.0, 'b'), (1095.0, 'b')):
            demand.seen(image, when)
        self.assertEqual(['b', 'a'], demand.hot(now=1100.0))
        # The starts of 'a' leave the window.
        self.assertEqual(['b'], demand.hot(now=1115.0))
        self.assertEqual([], demand.hot(now=1300.0))

    def test_zero_disables(self):
        demand = hot.Demand(window=100.0, min_builds=0)
        demand.seen('a', 1000.0)
        self.assertEqual([], demand.hot(now=1000.0))


class ParseTest(base.NodeTestCase):

    def test_host_from_publisher_when_payload_lacks_it(self):
        instance, host, when = notifications.parse(
            'nova-compute:cmp9', 'instance.create.start',
            {'nova_object.data': {'uuid': 'u'}},
            {'timestamp': '2026-01-01 00:00:00.250000'})
        self.assertEqual(('u', 'cmp9'), (instance, host))
        self.assertEqual(1767225600.25, when)

    def test_bad_timestamp(self):
        self.assertRaises(
            notifications.BadNotification, notifications.parse,
            'nova-compute:cmp9', 'instance.create.start',
            {'nova_object.data': {'uuid': 'u'}}, {'timestamp': 'yesterday'})


class UnreachableTest(base.NodeTestCase):

    NOVA_CONF = 'transport_url = rabbit://u:secretpw@127.0.0.1:1/\n'

    def test_unreachable_transport_retried_without_blocking(self):
        listener = notifications.Listener(
            self.settings, 'pool', builds.BuildTracker())
        listener.start()
        self.assertTrue(self.wait_logged(listener))
        listener.stop()  # prompt, although never connected
        self.assertFalse(listener.connected.is_set())
        self.assertEqual(1, self.log.output.count('retrying with backoff'))
        self.assertNotIn('secretpw', self.log.output)

    def wait_logged(self, listener, timeout=30):
        deadline = time.monotonic() + timeout
        while 'retrying with backoff' not in self.log.output:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True
