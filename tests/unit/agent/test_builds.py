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

"""Build pacing from notification timestamps (no wall clock involved)."""

import fixtures

from mlaccel.agent import builds

from tests import testcase


def wave(tracker, start, count, duration, prefix):
    """``count`` builds started at ``start``, each lasting ``duration``."""
    names = ['%s-%d' % (prefix, i) for i in range(count)]
    for name in names:
        tracker.started(name, start)
    for i, name in enumerate(names):
        tracker.ended(name, start + duration + i * 1e-3)
    return start + duration + count * 1e-3


class BuildTrackerTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))

    def tracker(self, **kwargs):
        kwargs.setdefault('initial', 4)
        kwargs.setdefault('max_limit', 32)
        return builds.BuildTracker(**kwargs)

    def test_limit_grows_while_builds_do_not_queue(self):
        tracker, t = self.tracker(), 1000.0
        for i in range(6):
            t = wave(tracker, t, tracker.limit, 10.0, 'w%d' % i)
        self.assertGreater(tracker.limit, 4)
        self.assertEqual(0, tracker.in_flight)
        self.assertAlmostEqual(10.0, tracker.median_duration, places=1)

    def test_limit_shrinks_when_builds_slow_down_with_load(self):
        tracker, t = self.tracker(initial=16), 1000.0
        t = wave(tracker, t, 2, 10.0, 'base')   # the uncongested latency
        before = tracker.limit
        for i in range(6):
            # Each build takes as long as the builds sharing the host say.
            t = wave(tracker, t, tracker.limit, 10.0 * tracker.limit / 2,
                     'w%d' % i)
        self.assertLess(tracker.limit, before)

    def test_failures_shrink_the_limit(self):
        tracker = self.tracker(initial=10)
        for i in range(5):
            tracker.started('b%d' % i, 100.0)
            tracker.ended('b%d' % i, 110.0, ok=False)
        self.assertLess(tracker.limit, 10)
        self.assertEqual(0.0, tracker.throughput(now=120.0))

    def test_builds_over_the_limit_count_but_do_not_teach(self):
        tracker = self.tracker(initial=2, max_limit=2)
        for i in range(5):
            tracker.started('b%d' % i, 100.0)
        self.assertEqual(5, tracker.in_flight)
        self.assertEqual(2, tracker.limiter.in_flight)
        for i in range(5):
            tracker.ended('b%d' % i, 130.0)
        self.assertEqual(0, tracker.in_flight)
        self.assertEqual(0, tracker.limiter.in_flight)

    def test_duplicate_start_and_unknown_end(self):
        tracker = self.tracker()
        tracker.started('a', 100.0)
        tracker.started('a', 101.0)
        self.assertEqual(1, tracker.in_flight)
        generation = tracker.generation
        tracker.ended('started-before-we-listened', 105.0)
        self.assertGreater(tracker.generation, generation)
        self.assertEqual(1, tracker.in_flight)

    def test_lost_build_expires_as_failure(self):
        tracker = self.tracker(build_timeout=60.0)
        tracker.started('lost', 100.0)
        tracker.started('fresh', 150.0)
        self.assertEqual(1, tracker.expire(now=170.0))
        self.assertEqual(1, tracker.in_flight)
        self.assertEqual(1, tracker.limiter.in_flight)
        self.assertIn('Build of lost started 70 s ago', self.log.output)

    def test_throughput_is_the_limit_over_the_median_duration(self):
        tracker = self.tracker(window=100.0, initial=4, max_limit=4)
        for i in range(10):
            tracker.started('b%d' % i, 1000.0 + i * 10)
            tracker.ended('b%d' % i, 1005.0 + i * 10)
        # 4 slots, builds of 5 s each.
        self.assertAlmostEqual(0.8, tracker.throughput(now=1100.0))
        # Slower builds later: only those inside the window count.
        for i in range(10, 15):
            tracker.started('b%d' % i, 1200.0 + i)
            tracker.ended('b%d' % i, 1210.0 + i)
        self.assertAlmostEqual(0.4, tracker.throughput(now=1250.0))
        self.assertEqual(0.0, tracker.throughput(now=5000.0))

    def test_fewer_builds_sent_is_not_slower(self):
        few, many = self.tracker(), self.tracker()
        wave(few, 1000.0, 1, 5.0, 'f')
        for i in range(4):
            wave(many, 1000.0 + i, 4, 5.0, 'm%d' % i)
        # Each host's slots at the same measured speed: one build sent
        # counts as much as sixteen.
        for tracker in (few, many):
            self.assertAlmostEqual(tracker.limit / 5.0,
                                   tracker.throughput(now=1010.0), places=2)
        self.assertGreaterEqual(few.throughput(now=1010.0), 0.8)

    def test_out_of_order_end_uses_its_own_time(self):
        tracker = self.tracker()
        tracker.started('a', 100.0)
        tracker.started('b', 200.0)
        tracker.ended('a', 150.0)
        self.assertEqual(50.0, tracker.limiter.base_latency)
