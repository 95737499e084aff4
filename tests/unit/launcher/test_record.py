"""The launch record: timelines from mixed clocks, JSON and the table."""

import json
import os

import fixtures
import testtools

from mlaccel.launcher import actions
from mlaccel.launcher import record


def _vm(name, requested, **observed):
    return {'name': name, 'state': 'succeeded',
            'observed': dict(observed, requested=requested)}


class VmTimelineTest(testtools.TestCase):

    def test_all_sources(self):
        timeline = record.vm_timeline('vm0', {
            'requested': 100.0, 'scheduled': 100.5, 'built': 103.0,
            'active_seen': 103.8, 'first_step_at': 110.0,
            'finished_at': 130.0})
        self.assertEqual({'scheduling': 0.5, 'creation': 2.5,
                          'buffering': 7.0, 'running': 20.0},
                         timeline.durations())
        self.assertEqual(30.0, timeline.total())

    def test_active_seen_used_without_nova_and_when_earlier(self):
        timeline = record.vm_timeline('vm0', {
            'requested': 100.0, 'active_seen': 104.0})
        self.assertEqual(104.0, timeline.events['active'])
        self.assertNotIn('scheduled', timeline.events)
        self.assertIsNone(timeline.duration('scheduling'))
        timeline = record.vm_timeline('vm0', {
            'requested': 100.0, 'built': 105.0, 'active_seen': 104.0})
        self.assertEqual(104.0, timeline.events['active'])

    def test_readiness_push_bounds_active(self):
        # The guest's daemon reported ready before Nova wrote the build end.
        timeline = record.vm_timeline('vm0', {
            'requested': 100.0, 'built': 105.0, 'active_seen': 105.5,
            'ready_received': 104.5})
        self.assertEqual(104.5, timeline.events['active'])

    def test_coarse_or_skewed_times_clamped_monotonic(self):
        # Nova's whole-second times may precede the request; a guest clock
        # may lag: no stage ever gets a negative duration.
        timeline = record.vm_timeline('vm0', {
            'requested': 100.7, 'scheduled': 100.0, 'built': 102.0,
            'first_step_at': 101.0, 'finished_at': 105.0})
        durations = timeline.durations()
        self.assertEqual(0.0, durations['scheduling'])
        self.assertEqual(0.0, durations['buffering'])
        for value in durations.values():
            self.assertGreaterEqual(value, 0.0)


class BuildTest(testtools.TestCase):

    def _record(self):
        vms = [_vm('vm0', 100.0, scheduled=101.0, built=104.0,
                   first_step_at=106.0, finished_at=116.0),
               _vm('vm1', 100.2, scheduled=101.5, built=105.0,
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
        self.assertEqual(1.0, rec['vms'][0]['timeline']['durations'][
            'scheduling'])

    def test_json_round_trip_atomic(self):
        rec = self._record()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'record.json')
        record.write_json(rec, path)
        with open(path) as stream:
            self.assertEqual(rec, json.load(stream))
        self.assertEqual(['record.json'], os.listdir(os.path.dirname(path)))

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

    def test_table_with_missing_stages(self):
        rec = record.build('abc', {}, [_vm('vm0', 100.0)], 'failed')
        lines = record.format_table(rec).splitlines()
        self.assertEqual(['vm0', '-', '-', '-', '-', '0.000', 'succeeded'],
                         lines[2].split())
        self.assertEqual(['task', '-', '-', '-', '-', '0.000', 'failed'],
                         lines[4].split())


class ActionTimesTest(testtools.TestCase):
    """Parsing of instance actions as Nova 34 returns them."""

    def test_create_action(self):
        times = actions.stage_times({
            'start_time': '2026-01-02T03:04:05.500000',
            'events': [{'event': 'compute__do_build_and_run_instance',
                        'start_time': '2026-01-02T03:04:06.000000',
                        'finish_time': '2026-01-02T03:04:09.250000',
                        'result': 'Success'}]})
        base = actions.parse_time('2026-01-02T03:04:05+00:00')
        self.assertEqual(0.5, times['scheduled'] - base)
        self.assertEqual(1.0, times['build_started'] - base)
        self.assertEqual(4.25, times['built'] - base)
        self.assertEqual('Success', times['build_result'])

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

    def test_parse_time(self):
        self.assertIsNone(actions.parse_time(None))
        self.assertEqual(0.0, actions.parse_time('1970-01-01T00:00:00'))
        self.assertEqual(3600.0,
                         actions.parse_time('1970-01-01T02:00:00+01:00'))
        self.assertEqual(7.0, actions.parse_time(7))
