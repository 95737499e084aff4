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

"""The launch record and where its boundaries come from.

Boundaries from the best source, JSON and the table; the notification
collector and listener that give the precise ones.
"""

import json
import os
import threading

import fixtures
from oslo_config import cfg

from mlaccel.launcher import record
from mlaccel import lifecycle
from mlaccel.nova import actions
from mlaccel.nova import notifications as events

from tests import testcase

UUID = '7b6b2e4e-4d7e-4b8e-9a51-2f0c0f0c0f01'


def _vm(name, requested, **observed):
    return {'name': name, 'state': 'succeeded',
            'observed': dict(observed, requested=requested)}


def _notified(scheduled=None, active=None, build_started=None):
    return {'scheduled': scheduled, 'build_started': build_started,
            'active': active, 'failed': None, 'builds': 1}


def _nova(build_started=None, built=None, precision=1.0):
    return {'requested': None, 'scheduled': None,
            'build_started': build_started, 'built': built,
            'build_result': 'Success', 'precision': precision}


class VmTimelineTest(testcase.TestCase):

    def test_notifications_and_taskd_give_every_boundary(self):
        timeline = record.vm_timeline('vm0', {
            'requested': 100.0,
            'notified': _notified(scheduled=102.25, active=105.5),
            'nova': _nova(build_started=102.0, built=106.0),
            'active_seen': 106.3, 'first_step_at': 110.0,
            'started_at': 109.0, 'finished_at': 130.0})
        self.assertEqual({'scheduling': 2.25, 'creation': 3.25,
                          'buffering': 4.5, 'running': 20.0},
                         timeline.durations())
        self.assertEqual(30.0, timeline.total())
        self.assertEqual(timeline.total(), sum(timeline.durations().values()))
        sources = {event: (b.source, b.event, b.precision)
                   for event, b in timeline.boundaries.items()}
        self.assertEqual({
            'requested': ('launcher', 'create request sent', 1e-6),
            'scheduled': ('nova-notification',
                          'scheduler.select_destinations.end', 1e-6),
            'active': ('nova-notification', 'instance.create.end', 1e-6),
            'started': ('taskd', 'first_step', 1e-6),
            'finished': ('taskd', 'task process ended', 1e-6)}, sources)

    def test_instance_actions_fallback_never_uses_the_request_time(self):
        # The create action's start time is the API's request time: using it
        # as the end of scheduling made scheduling read 0.
        nova = actions.stage_times({
            'start_time': '2026-01-02T03:04:05',
            'events': [{'event': 'compute__do_build_and_run_instance',
                        'start_time': '2026-01-02T03:04:08',
                        'finish_time': '2026-01-02T03:04:11',
                        'result': 'Success'}]})
        base = actions.parse_time('2026-01-02T03:04:05')
        timeline = record.vm_timeline('vm0', {
            'requested': base - 0.2, 'nova': nova, 'active_seen': base + 7,
            'first_step_at': base + 9, 'finished_at': base + 10})
        self.assertEqual(base + 3, timeline.events['scheduled'])
        self.assertEqual(base + 6, timeline.events['active'])
        for event in ('scheduled', 'active'):
            boundary = timeline.boundaries[event]
            self.assertEqual('nova-instance-action', boundary.source)
            self.assertEqual(1.0, boundary.precision)
        self.assertEqual(['scheduled', 'active'],
                         list(record.fallbacks(timeline.to_dict())))

    def test_launcher_observation_is_the_last_resort_for_active(self):
        timeline = record.vm_timeline('vm0', {
            'requested': 100.0, 'active_seen': 104.0, 'ready_received': 103.5,
            'poll_interval': 0.5})
        self.assertEqual(103.5, timeline.events['active'])
        boundary = timeline.boundaries['active']
        self.assertEqual(('launcher', 'readiness push received', 0.5),
                         (boundary.source, boundary.event,
                          boundary.precision))
        self.assertNotIn('scheduled', timeline.events)
        self.assertIsNone(timeline.duration('scheduling'))

    def test_coarse_or_skewed_times_shifted_and_said_so(self):
        # Whole-second times may precede the request; a guest clock may
        # lag: no stage is negative and the record says what was moved.
        timeline = record.vm_timeline('vm0', {
            'requested': 100.7, 'nova': _nova(build_started=100.0,
                                              built=102.0),
            'first_step_at': 101.0, 'finished_at': 105.0})
        durations = timeline.durations()
        self.assertEqual(0.0, durations['scheduling'])
        self.assertEqual(0.0, durations['buffering'])
        self.assertAlmostEqual(0.7, timeline.boundaries['scheduled'].shifted)
        self.assertEqual(1.0, timeline.boundaries['started'].shifted)
        self.assertEqual(0.0, timeline.boundaries['finished'].shifted)
        self.assertAlmostEqual(timeline.total(), sum(durations.values()))

    def test_task_started_without_first_step(self):
        timeline = record.vm_timeline('vm0', {
            'requested': 1.0, 'started_at': 5.0, 'finished_at': 6.0})
        self.assertEqual(5.0, timeline.events['started'])
        self.assertIn('no first step', timeline.boundaries['started'].event)


class BuildTest(testcase.TestCase):

    def _record(self):
        vms = [_vm('vm0', 100.0, notified=_notified(101.0, 104.0),
                   first_step_at=106.0, finished_at=116.0),
               _vm('vm1', 100.2, notified=_notified(101.5, 105.0),
                   first_step_at=107.0, finished_at=118.0)]
        return record.build('abc', {'count': 2}, vms, 'succeeded',
                            cleanup={'deleted': ['a', 'b'], 'leaked': []})

    def test_task_spans_its_vms(self):
        rec = self._record()
        self.assertEqual(2, len(rec['vms']))
        task = rec['timeline']
        self.assertEqual(100.0, task['events']['requested'])
        self.assertEqual(105.0, task['events']['active'])
        self.assertEqual(118.0, task['events']['finished'])
        self.assertEqual(18.0, task['total'])
        self.assertEqual(task['total'], sum(task['durations'].values()))
        self.assertEqual('nova-notification',
                         task['boundaries']['scheduled']['source'])
        self.assertEqual(1.0, rec['vms'][0]['timeline']['durations'][
            'scheduling'])
        self.assertEqual(lifecycle.DEFINITIONS, rec['definitions'])

    def test_json_round_trip_atomic(self):
        rec = self._record()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'record.json')
        record.write_json(rec, path)
        with open(path) as stream:
            self.assertEqual(rec, json.load(stream))
        self.assertEqual(['record.json'], os.listdir(os.path.dirname(path)))
        again = lifecycle.Timeline.from_dict(rec['vms'][1]['timeline'])
        self.assertEqual(rec['vms'][1]['timeline'], again.to_dict())

    def test_compact_json_is_one_line_and_the_same_data(self):
        rec = self._record()
        directory = self.useFixture(fixtures.TempDir()).path
        indented = os.path.join(directory, 'indented.json')
        compact = os.path.join(directory, 'compact.json')
        record.write_json(rec, indented)
        record.write_json(rec, compact, compact=True)
        with open(compact) as stream:
            lines = stream.read().splitlines()
        self.assertEqual(1, len(lines))
        self.assertEqual(rec, json.loads(lines[0]))
        self.assertLess(os.path.getsize(compact), os.path.getsize(indented))

    def test_unserialisable_record_leaves_no_file(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'record.json')
        self.assertRaises(TypeError, record.write_json, {'x': object()},
                          path)
        self.assertEqual([], os.listdir(directory))

    def test_table(self):
        table = record.format_table(self._record())
        lines = table.splitlines()
        self.assertEqual(['vm', 'scheduling', 'creation', 'buffering',
                          'running', 'total', 'state'], lines[0].split())
        self.assertEqual(['vm0', '1.000', '3.000', '2.000', '10.000',
                          '16.000', 'succeeded'], lines[2].split())
        self.assertEqual(['task', '1.500', '3.500', '2.000', '11.000',
                          '18.000', 'succeeded'], lines[5].split())
        self.assertIn('launch abc', lines[-1])

    def test_table_names_fallback_boundaries(self):
        rec = record.build('abc', {}, [_vm(
            'vm0', 100.0, nova=_nova(101.0, 103.0), first_step_at=104.0,
            finished_at=105.0)], 'succeeded')
        lines = record.format_table(rec).splitlines()
        self.assertEqual(
            ['vm0: scheduled from nova-instance-action '
             'compute__do_build_and_run_instance start (precision 1 s)',
             'vm0: active from nova-instance-action '
             'compute__do_build_and_run_instance finish (precision 1 s)'],
            lines[-2:])

    def test_table_with_missing_stages(self):
        rec = record.build('abc', {}, [_vm('vm0', 100.0)], 'failed')
        lines = record.format_table(rec).splitlines()
        self.assertEqual(['vm0', '-', '-', '-', '-', '0.000', 'succeeded'],
                         lines[2].split())
        self.assertEqual(['task', '-', '-', '-', '-', '0.000', 'failed'],
                         lines[4].split())


class ActionTimesTest(testcase.TestCase):
    """Parsing of instance actions as Nova 34 returns them."""

    def test_create_action(self):
        times = actions.stage_times({
            'start_time': '2026-01-02T03:04:05.500000',
            'events': [{'event': 'compute__do_build_and_run_instance',
                        'start_time': '2026-01-02T03:04:06.250000',
                        'finish_time': '2026-01-02T03:04:09.250000',
                        'result': 'Success'}]})
        base = actions.parse_time('2026-01-02T03:04:05+00:00')
        self.assertEqual(0.5, times['requested'] - base)
        self.assertIsNone(times['scheduled'])
        self.assertEqual(1.25, times['build_started'] - base)
        self.assertEqual(4.25, times['built'] - base)
        self.assertEqual('Success', times['build_result'])
        self.assertEqual(1e-6, times['precision'])

    def test_failed_build_and_schedule_event(self):
        times = actions.stage_times({
            'start_time': '2026-01-02T03:04:05',
            'events': [{'event': 'conductor_schedule_instances',
                        'start_time': '2026-01-02T03:04:05',
                        'finish_time': '2026-01-02T03:04:07Z'},
                       {'event': 'compute__do_build_and_run_instance',
                        'start_time': '2026-01-02T03:04:08',
                        'finish_time': '2026-01-02T03:04:09',
                        'result': 'Error'}]})
        self.assertEqual(actions.parse_time('2026-01-02T03:04:07+00:00'),
                         times['scheduled'])
        self.assertIsNone(times['built'])
        self.assertEqual('Error', times['build_result'])
        self.assertEqual(1.0, times['precision'])

    def test_parse_time_and_precision(self):
        self.assertIsNone(actions.parse_time(None))
        self.assertEqual(0.0, actions.parse_time('1970-01-01T00:00:00'))
        self.assertEqual(3600.0,
                         actions.parse_time('1970-01-01T02:00:00+01:00'))
        self.assertEqual(7.0, actions.parse_time(7))
        self.assertEqual(1.0, actions.precision('2026-01-02T03:04:05'))
        self.assertEqual(1.0, actions.precision('2026-01-02 03:04:05.000000'))
        self.assertEqual(1e-6, actions.precision('2026-01-02T03:04:05.000001'))
        self.assertIsNone(actions.precision(None))


def _payload(event_type, server, extra=None):
    key = 'instance_uuid' if event_type.startswith('scheduler.') else 'uuid'
    return {'nova_object.name': 'Payload', 'nova_object.version': '1.0',
            'nova_object.namespace': 'nova',
            'nova_object.data': dict(extra or {}, **{key: server})}


class InstanceEventsTest(testcase.TestCase):

    def test_times_from_notifications(self):
        collected = events.InstanceEvents()
        for event_type, stamp in (
                (events.SCHEDULE_END, '2026-01-02 03:04:05.250000'),
                (events.CREATE_START, '2026-01-02 03:04:05.500000'),
                (events.CREATE_ERROR, '2026-01-02 03:04:06.000000'),
                # A re-schedule: a second host chosen and built.
                (events.SCHEDULE_END, '2026-01-02 03:04:06.500000'),
                (events.CREATE_START, '2026-01-02 03:04:06.750000'),
                (events.CREATE_END, '2026-01-02 03:04:07.125000')):
            self.assertTrue(collected.add(
                event_type, _payload(event_type, UUID), stamp))
        base = actions.parse_time('2026-01-02 03:04:05')
        times = collected.times(UUID)
        self.assertEqual(0.25, times['scheduled'] - base)
        self.assertEqual(0.5, times['build_started'] - base)
        self.assertEqual(2.125, times['active'] - base)
        self.assertEqual(1.0, times['failed'] - base)
        self.assertEqual(2, times['builds'])
        self.assertEqual({'scheduled': None, 'build_started': None,
                          'active': None, 'failed': None, 'builds': 0},
                         collected.times('other'))

    def test_other_or_bad_notifications_ignored(self):
        collected = events.InstanceEvents()
        self.assertFalse(collected.add(
            'instance.delete.end', _payload('instance.delete.end', UUID),
            '2026-01-02 03:04:05.1'))
        self.assertFalse(collected.add(events.CREATE_END, {'x': 1},
                                       '2026-01-02 03:04:05.1'))
        self.assertFalse(collected.add(events.CREATE_END, 'not a dict',
                                       '2026-01-02 03:04:05.1'))
        self.assertFalse(collected.add(
            events.CREATE_END, _payload(events.CREATE_END, UUID), 'garbage'))
        self.assertFalse(collected.add(
            events.CREATE_END, _payload(events.CREATE_END, UUID), None))
        self.assertEqual(0, collected.times(UUID)['builds'])
        self.assertIsNone(collected.times(UUID)['active'])

    def test_keeps_the_latest_instances_only(self):
        collected = events.InstanceEvents(capacity=2)
        for server in ('a', 'b', 'c'):
            collected.add(events.CREATE_END,
                          _payload(events.CREATE_END, server), 10.0)
        self.assertIsNone(collected.times('a')['active'])
        self.assertEqual(10.0, collected.times('c')['active'])

    def test_wait_wakes_on_arrival(self):
        collected = events.InstanceEvents()
        arrived = threading.Event()

        def later():
            arrived.wait()
            collected.add(events.CREATE_END,
                          _payload(events.CREATE_END, UUID), 5.0)
        thread = threading.Thread(target=later)
        thread.start()
        self.addCleanup(thread.join)
        arrived.set()
        self.assertTrue(collected.wait(
            lambda: collected.times(UUID)['active'] is not None, 60))
        self.assertFalse(collected.wait(lambda: False, 0))


class NotificationSourceTest(testcase.TestCase):
    """The listener on oslo.messaging's in-memory transport.

    A real oslo.messaging notifier sends the way Nova sends versioned
    notifications.
    """

    def test_listener_collects_from_its_own_pool(self):
        import oslo_messaging
        conf = cfg.ConfigOpts()
        conf([], default_config_files=[])
        one = events.NotificationSource('fake:/', conf)
        two = events.NotificationSource('fake:/', conf)
        for source in (one, two):
            source.start()
            self.addCleanup(source.stop)
        # Nova publishes to its control exchange, "nova".
        conf.set_override('control_exchange', 'nova')
        transport = oslo_messaging.get_notification_transport(
            conf, url='fake:/')
        self.addCleanup(transport.cleanup)
        notifier = oslo_messaging.Notifier(
            transport, publisher_id='nova-compute:host1',
            driver='messagingv2', topics=['versioned_notifications'])
        notifier.info({}, 'instance.update', _payload('instance.update',
                                                      UUID))
        notifier.info({}, events.CREATE_END,
                      _payload(events.CREATE_END, UUID))
        for source in (one, two):
            self.assertTrue(source.events.wait(
                lambda: source.times(UUID)['active'] is not None, 60))
        # Each pool got the notification: neither took it from the other.
        self.assertEqual(one.times(UUID), two.times(UUID))
        self.assertNotEqual(one.pool, two.pool)

    def test_unreachable_rabbitmq_fails_at_start(self):
        # oslo.messaging alone would retry for ever; the launcher falls
        # back to instance actions instead (no RabbitMQ listens on port 1).
        conf = cfg.ConfigOpts()
        conf([], default_config_files=[])
        source = events.NotificationSource(
            'rabbit://guest:pw0@127.0.0.1:1/', conf)
        error = self.assertRaises(events.Unreachable, source.start)
        self.assertIn('rabbit://guest:***@127.0.0.1:1/', str(error))
        source.stop()  # nothing to stop

    def test_passwords_masked_for_every_host(self):
        url = 'rabbit://a:s3cret@h1:5672,b:0ther@h2:5672/vhost'
        self.assertEqual(
            'at rabbit://a:***@h1:5672,b:***@h2:5672/vhost: *** wrong',
            events.masked('at %s: 0ther wrong' % url, url))
        self.assertEqual('fake:/', events.masked('fake:/', 'fake:/'))
