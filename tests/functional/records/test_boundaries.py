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

"""Each stage of the life-cycle record holds exactly the time spent in it.

Nova's in-process services (API, conductor, scheduler, compute on the fake
hypervisor whose guests are real task daemons, see
:mod:`tests.functional.launcher.base`) with one part slowed by a known
delay at a time: a scheduler filter, the hypervisor's spawn, the task
daemon's preload. The slowed part notes the window it spent; the record
must put that whole window inside the stage it belongs to, so that stage
lasts at least the delay. No upper bound on any time is asserted.

Nova's versioned notifications reach the launcher's listener as they would
from RabbitMQ: Nova's notifier (the harness's fake, which tests use to wait
for notifications) also hands each notification to a real oslo.messaging
notifier on oslo.messaging's in-memory transport, where the launcher's
listener consumes from a pool of its own. The same listener against a real
RabbitMQ is tested on the all-in-one cloud
(``tests.functional.aio.test_notifications``).
"""

import functools
import json
import os
import threading
import time

import fixtures
from nova.compute import utils as compute_utils
from nova import rpc
from nova.scheduler import filters
import oslo_messaging

from mlaccel.launcher import api
from tests.functional.launcher import base
from tests.functional.launcher import guest

#: Seconds each slowed part takes.
DELAY = 2.0
TRANSPORT_URL = 'fake:/'
SLOW_PRELOAD = 'tests.slow_preload:warm'

#: ``(start, end)`` of each delay spent in this process.
WINDOWS = []
#: instance uuid -> ``(start, end)`` of the scheduler delay of its request.
SCHEDULED = {}
_LOCK = threading.Lock()


def _spend_delay():
    start = time.time()
    time.sleep(DELAY)
    window = (start, time.time())
    with _LOCK:
        WINDOWS.append(window)
    return window


class SlowFilter(filters.BaseHostFilter):
    """Passes every host after sleeping ``DELAY`` once per request."""

    run_filter_once_per_request = True

    def filter_all(self, filter_obj_list, spec_obj):
        SCHEDULED[spec_obj.instance_uuid] = _spend_delay()
        return list(filter_obj_list)

    def host_passes(self, host_state, spec_obj):
        return True


class SlowSpawnDriver(guest.TaskdGuestDriver):
    """The launcher tests' driver, its spawn slower by ``DELAY``."""

    def spawn(self, *args, **kwargs):
        _spend_delay()
        return super().spawn(*args, **kwargs)


class LateBootDriver(guest.TaskdGuestDriver):
    """Boots a server's guest once Nova has announced it ACTIVE.

    The launcher tests' driver starts the guest inside spawn; a real guest
    boots after the hypervisor has started the domain. Holding the boot
    until ``instance.create.end`` keeps the whole preload after ``active``.
    The tests using it build one server at a time.
    """

    #: uuid -> the held boot of its guest.
    pending = {}

    def spawn(self, context, instance, *args, **kwargs):
        boot = guest.boot
        guest.boot = lambda *a, **k: self.pending.__setitem__(
            instance.uuid, functools.partial(boot, *a, **k))
        try:
            super().spawn(context, instance, *args, **kwargs)
        finally:
            guest.boot = boot


class TeeNotifier:
    """Nova's notifier for tests, and a real one on a transport.

    Both get every versioned notification; the real one stamps and sends
    it as oslo.messaging does in production.
    """

    def __init__(self, fake, real):
        self.fake = fake
        self.real = real

    def prepare(self, publisher_id=None):
        return TeeNotifier(self.fake.prepare(publisher_id=publisher_id),
                           self.real.prepare(publisher_id=publisher_id))

    def is_enabled(self):
        return True

    def __getattr__(self, priority):
        fake, real = getattr(self.fake, priority), getattr(self.real,
                                                           priority)

        def notify(ctxt, event_type, payload):
            fake(ctxt, event_type=event_type, payload=payload)
            real(ctxt, event_type=event_type, payload=payload)
        return notify


def tee_notifications(test, url=TRANSPORT_URL):
    """Send Nova's notifications through a real notifier on ``url`` too.

    Call in ``setUp`` after Nova's harness is up: its test notifier keeps
    working, and a listener on ``url`` hears what production would send.
    """
    transport = oslo_messaging.get_notification_transport(rpc.CONF, url=url)
    real = oslo_messaging.Notifier(
        transport, driver='messagingv2',
        serializer=rpc.RequestContextSerializer(rpc.JsonPayloadSerializer()),
        topics=['versioned_notifications'])
    test.stub_out('nova.rpc.NOTIFIER', TeeNotifier(rpc.NOTIFIER, real))


class BoundaryTestCase(base.LauncherTestCase):

    driver = guest.TaskdGuestDriver

    def setUp(self):
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.TaskdGuestDriver', self.driver))
        self.flags(notification_format='versioned', group='notifications')
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.records.test_boundaries.WINDOWS', []))
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.records.test_boundaries.SCHEDULED', {}))
        tee_notifications(self)

    def launch(self, count, preload=('json',)):
        result = api.launch(
            self.conn, base.IMAGE, base.FLAVOR, count, base.ECHO, {'x': 1},
            timeout=60, listen_host='127.0.0.1', preload=list(preload),
            poll_interval=0.5, delete_timeout=60,
            notification_url=TRANSPORT_URL)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        for vm in result['vms']:
            timeline = vm['timeline']
            self.assertAlmostEqual(timeline['total'],
                                   sum(timeline['durations'].values()))
        self._assert_nothing_left()
        return result

    def assertPrecise(self, result):
        """Every boundary came from the event that defines it."""
        expected = {
            'requested': ('launcher', 'create request sent'),
            'scheduled': ('nova-notification',
                          'scheduler.select_destinations.end'),
            'active': ('nova-notification', 'instance.create.end'),
            'started': ('taskd', 'first_step'),
            'finished': ('taskd', 'task process ended')}
        for vm in result['vms']:
            boundaries = vm['timeline']['boundaries']
            self.assertEqual(expected, {
                event: (b['source'], b['event'])
                for event, b in boundaries.items()}, vm['name'])
            for event, boundary in boundaries.items():
                self.assertEqual(1e-6, boundary['precision'])
                self.assertEqual(0.0, boundary['shifted'], event)

    def assertWithin(self, window, timeline, first, last):
        """The window lies between two boundaries of the timeline."""
        events_ = timeline['events']
        self.assertLessEqual(events_[first], window[0],
                             '%s after the delay began' % first)
        self.assertLessEqual(window[1], events_[last],
                             '%s before the delay ended' % last)


class SlowSchedulerTest(BoundaryTestCase):

    def setUp(self):
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters',
            'tests.functional.records.test_boundaries.SlowFilter'],
            enabled_filters=['ComputeFilter', 'SlowFilter'],
            group='filter_scheduler')
        super().setUp()

    def test_scheduling_holds_the_scheduler_delay(self):
        result = self.launch(2)
        self.assertEqual(2, len(WINDOWS))
        for vm in result['vms']:
            timeline = vm['timeline']
            self.assertGreaterEqual(timeline['durations']['scheduling'],
                                    DELAY, vm['name'])
            # The delay of this VM's own request lies inside its scheduling
            # stage, so none of it is counted as its creation. (The other
            # VM's delay may overlap this one's creation: the requests are
            # sent concurrently, not in lockstep.)
            window = SCHEDULED[vm['server_id']]
            self.assertWithin(window, timeline, 'requested', 'scheduled')
        self.assertPrecise(result)


class SlowBuildTest(BoundaryTestCase):

    driver = SlowSpawnDriver

    def test_creation_holds_the_build_delay(self):
        result = self.launch(1)
        timeline = result['vms'][0]['timeline']
        self.assertEqual(1, len(WINDOWS))
        self.assertGreaterEqual(timeline['durations']['creation'], DELAY)
        self.assertWithin(WINDOWS[0], timeline, 'scheduled', 'active')
        self.assertPrecise(result)


class SlowPreloadTest(BoundaryTestCase):

    driver = LateBootDriver

    def setUp(self):
        super().setUp()
        log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'preload.jsonl')
        self.useFixture(fixtures.EnvironmentVariable(
            'MLACCEL_TEST_PRELOAD_LOG', log))
        self.useFixture(fixtures.EnvironmentVariable(
            'MLACCEL_TEST_PRELOAD_DELAY', str(DELAY)))
        self.preload_log = log
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.records.test_boundaries.LateBootDriver.pending',
            {}))
        original = compute_utils.notify_about_instance_create

        def notify_then_boot(context, instance, host, phase=None, **kwargs):
            result = original(context, instance, host, phase=phase, **kwargs)
            boot = LateBootDriver.pending.pop(instance.uuid, None)
            if phase == 'end' and boot:
                boot()
            return result
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.utils.notify_about_instance_create',
            notify_then_boot))

    def test_buffering_holds_the_preload_delay(self):
        result = self.launch(1, preload=['json', SLOW_PRELOAD])
        timeline = result['vms'][0]['timeline']
        with open(self.preload_log) as stream:
            windows = [json.loads(line) for line in stream]
        self.assertEqual(1, len(windows))
        window = (windows[0]['start'], windows[0]['end'])
        self.assertGreaterEqual(timeline['durations']['buffering'], DELAY)
        self.assertWithin(window, timeline, 'active', 'started')
        self.assertIn('tests.slow_preload',
                      result['vms'][0]['ready']['preloaded'])
        self.assertPrecise(result)
