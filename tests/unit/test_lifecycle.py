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

"""The life-cycle stages and timeline records."""

import json
import time


from mlaccel import lifecycle

from tests import testcase

FULL = dict(requested=100.0, scheduled=101.5, active=131.5, started=134.0,
            finished=400.0)


class TestTimeline(testcase.TestCase):

    def test_stages_and_events_are_in_life_order(self):
        self.assertEqual(['scheduling', 'creation', 'buffering', 'running'],
                         [s.value for s in lifecycle.STAGES])
        self.assertEqual(len(lifecycle.STAGES) + 1, len(lifecycle.EVENTS))
        self.assertEqual('buffering', lifecycle.Stage('buffering'))

    def test_durations_of_a_full_life(self):
        timeline = lifecycle.Timeline('vm1', **FULL)
        self.assertEqual({'scheduling': 1.5, 'creation': 30.0,
                          'buffering': 2.5, 'running': 266.0},
                         timeline.durations())
        self.assertEqual(300.0, timeline.total())
        self.assertEqual(30.0, timeline.duration(lifecycle.Stage.CREATION))
        self.assertEqual(30.0, timeline.duration('creation'))

    def test_unknown_ends_give_none(self):
        timeline = lifecycle.Timeline('vm1', requested=1.0, active=9.0)
        self.assertEqual({'scheduling': None, 'creation': None,
                          'buffering': None, 'running': None},
                         timeline.durations())
        self.assertEqual(8.0, timeline.total())
        self.assertIsNone(lifecycle.Timeline('vm2', active=3.0).total())
        self.assertIsNone(lifecycle.Timeline().total())

    def test_unknown_event_and_stage_are_refused(self):
        timeline = lifecycle.Timeline()
        exc = self.assertRaises(ValueError, timeline.mark, 'booted', 1.0)
        self.assertIn("unknown life-cycle event 'booted'", str(exc))
        self.assertRaises(ValueError, lifecycle.Timeline, booted=1.0)
        self.assertRaises(ValueError, timeline.duration, 'warming')
        self.assertEqual({}, timeline.events)

    def test_mark_defaults_to_now_and_returns_the_time(self):
        timeline = lifecycle.Timeline()
        before = time.time()
        when = timeline.mark('requested')
        self.assertTrue(before <= when <= time.time())
        self.assertEqual(when, timeline.events['requested'])
        self.assertEqual(5.0, timeline.mark('requested', '5'))

    def test_dict_round_trip_through_json(self):
        timeline = lifecycle.Timeline('vm1', **FULL)
        data = json.loads(json.dumps(timeline.to_dict()))
        self.assertEqual(timeline.durations(), data['durations'])
        self.assertEqual(300.0, data['total'])
        again = lifecycle.Timeline.from_dict(data)
        self.assertEqual('vm1', again.name)
        self.assertEqual(timeline.events, again.events)
        self.assertEqual('', lifecycle.Timeline.from_dict({}).name)

    def test_from_dict_refuses_unknown_events(self):
        self.assertRaises(ValueError, lifecycle.Timeline.from_dict,
                          {'events': {'exploded': 1.0}})

    def test_task_span_waits_for_its_slowest_vm(self):
        vms = [
            lifecycle.Timeline('a', requested=100.0, scheduled=101.0,
                               active=120.0, started=121.0),
            lifecycle.Timeline('b', requested=100.5, scheduled=102.0,
                               active=150.0, started=150.2),
        ]
        task = lifecycle.Timeline.span('task', vms)
        self.assertEqual('task', task.name)
        self.assertEqual({'requested': 100.0, 'scheduled': 102.0,
                          'active': 150.0, 'started': 150.2}, task.events)
        self.assertEqual(48.0, task.duration('creation'))
        self.assertAlmostEqual(50.2, task.total())

    def test_task_span_omits_events_some_vm_has_not_reached(self):
        vms = [lifecycle.Timeline('a', requested=1.0, active=5.0),
               lifecycle.Timeline('b', requested=2.0)]
        self.assertEqual({'requested': 1.0},
                         lifecycle.Timeline.span('t', iter(vms)).events)
        self.assertEqual({}, lifecycle.Timeline.span('t', []).events)

    def test_every_event_has_a_definition(self):
        self.assertEqual(set(lifecycle.EVENTS), set(lifecycle.DEFINITIONS))

    def test_stages_add_up_to_the_total(self):
        timeline = lifecycle.Timeline('vm1', **FULL)
        self.assertEqual(timeline.total(), sum(timeline.durations().values()))

    def test_boundaries_kept_replaced_and_round_tripped(self):
        timeline = lifecycle.Timeline('vm1', **FULL)
        exact = lifecycle.Boundary(lifecycle.NOTIFICATION,
                                   'instance.create.end', 1e-6)
        timeline.mark('active', 131.25, exact)
        self.assertEqual({'active': exact}, timeline.boundaries)
        data = json.loads(json.dumps(timeline.to_dict()))
        self.assertEqual({'active': {'source': 'nova-notification',
                                     'event': 'instance.create.end',
                                     'precision': 1e-6, 'shifted': 0.0}},
                         data['boundaries'])
        again = lifecycle.Timeline.from_dict(data)
        self.assertEqual({'active': exact}, again.boundaries)
        # A new time without a source drops the old source.
        timeline.mark('active', 131.5)
        self.assertEqual({}, timeline.boundaries)

    def test_task_span_keeps_the_boundary_of_the_vm_it_took(self):
        coarse = lifecycle.Boundary(lifecycle.INSTANCE_ACTION, 'x', 1.0)
        exact = lifecycle.Boundary(lifecycle.NOTIFICATION, 'y', 1e-6)
        first = lifecycle.Timeline('a')
        first.mark('requested', 100.0, exact)
        first.mark('active', 110.0, coarse)
        second = lifecycle.Timeline('b')
        second.mark('requested', 101.0, coarse)
        second.mark('active', 109.0, exact)
        task = lifecycle.Timeline.span('t', [first, second])
        self.assertEqual({'requested': exact, 'active': coarse},
                         task.boundaries)
