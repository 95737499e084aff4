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

"""The adaptive concurrency limiter.

Convergence is shown on a simulated resource driven by a fake clock (a
deterministic discrete-event simulation, so no wall-clock assertion);
concurrency bounds on real threads and on eventlet green threads.
"""

import heapq
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time


from mlaccel import limiter as limiter_mod

from tests import testcase


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def simulate(capacity, events, limiter, clock, service=1.0):
    """Run a closed loop that always fills every slot of ``limiter``.

    The resource serves ``capacity(i)`` units of work at a time, each in
    ``service`` seconds; past its capacity work queues, so a unit started
    with ``n`` in flight takes ``service * n / capacity``. Returns the limit
    after each completion, the latency of each unit and the clock at each
    completion.
    """
    pending, seq = [], 0
    limits, latencies, times = [], [], []
    for i in range(events):
        while limiter.in_flight < limiter.limit:
            token = limiter.acquire(timeout=0)
            latency = service * max(1.0, limiter.in_flight / capacity(i))
            heapq.heappush(pending, (clock.now + latency, seq, token,
                                     latency))
            seq += 1
        clock.now, _, token, latency = heapq.heappop(pending)
        limiter.release(token)
        limits.append(limiter.limit)
        latencies.append(latency)
        times.append(clock.now)
    return limits, latencies, times


class TestConvergence(testcase.TestCase):

    def run_resource(self, capacity, events=3000, **kwargs):
        clock = FakeClock()
        kwargs.setdefault('max_limit', 64)
        limiter = limiter_mod.AdaptiveLimiter(clock=clock, **kwargs)
        return limiter, simulate(capacity, events, limiter, clock)

    def test_finds_the_capacity_and_keeps_the_queue_short(self):
        for capacity in (4, 16):
            _, (limits, latencies, times) = self.run_resource(
                lambda i: capacity, initial=2)
            half = len(limits) // 2
            throughput = (len(limits) - half - 1) / (times[-1] - times[half])
            # The resource is kept busy: at least 85 % of its capacity...
            self.assertGreater(throughput, 0.85 * capacity, capacity)
            # ...without a long queue: latency at most 2.5x the service time.
            self.assertLess(statistics.mean(latencies[half:]), 2.5, capacity)
            self.assertGreaterEqual(statistics.median(limits[half:]),
                                    capacity)

    def test_follows_a_capacity_change(self):
        _, (limits, _, _) = self.run_resource(
            lambda i: 16 if i < 3000 else 4, events=6000)
        before = statistics.median(limits[1500:3000])
        after = statistics.median(limits[4500:])
        self.assertGreaterEqual(before, 16)
        self.assertLess(after, before / 1.5)
        self.assertGreaterEqual(after, 4)

    def test_never_exceeds_max_limit(self):
        limiter, (limits, _, _) = self.run_resource(
            lambda i: 1000, initial=4, max_limit=16)
        self.assertEqual(16, max(limits))
        self.assertEqual(16, limits[-1])
        self.assertLessEqual(limiter.in_flight, 16)

    def test_never_drops_below_min_limit(self):
        _, (limits, _, _) = self.run_resource(
            lambda i: 0.1, initial=8, min_limit=3)
        self.assertEqual(3, min(limits))

    def test_learns_the_base_latency(self):
        limiter, _ = self.run_resource(lambda i: 8, events=500)
        self.assertEqual(1.0, limiter.base_latency)


class TestFailures(testcase.TestCase):

    def test_failures_shrink_the_limit_multiplicatively(self):
        clock = FakeClock()
        limiter = limiter_mod.AdaptiveLimiter(
            initial=20, min_limit=2, max_limit=64, backoff=0.5, clock=clock)
        seen = []
        for _ in range(5):
            limiter.release(limiter.acquire(), ok=False)
            seen.append(limiter.limit)
        self.assertEqual([10, 5, 2, 2, 2], seen)
        self.assertEqual(0, limiter.in_flight)

    def test_an_exception_in_the_slot_is_a_failure_and_propagates(self):
        limiter = limiter_mod.AdaptiveLimiter(initial=10, max_limit=10)

        def fail():
            with limiter.slot():
                self.assertEqual(1, limiter.in_flight)
                raise KeyError('boom')

        self.assertRaises(KeyError, fail)
        self.assertEqual(9, limiter.limit)
        self.assertEqual(0, limiter.in_flight)

    def test_bad_parameters_are_refused(self):
        for kwargs in ({'initial': 0, 'min_limit': 0},
                       {'initial': 1, 'min_limit': 2},
                       {'initial': 9, 'max_limit': 8},
                       {'alpha': 6, 'beta': 3}, {'smoothing': 0},
                       {'backoff': 1.0}, {'probe_every': 0}):
            self.assertRaises(ValueError, limiter_mod.AdaptiveLimiter,
                              **kwargs)


class TestAcquire(testcase.TestCase):

    def test_timeout_raises_limit_exceeded(self):
        limiter = limiter_mod.AdaptiveLimiter(initial=2, max_limit=2)
        limiter.acquire()
        limiter.acquire()
        exc = self.assertRaises(limiter_mod.LimitExceeded,
                                limiter.acquire, timeout=0.05)
        self.assertIn('2 of 2 slots busy', str(exc))
        self.assertRaises(limiter_mod.LimitExceeded, limiter.acquire,
                          timeout=0)
        self.assertEqual(2, limiter.in_flight)

    def test_a_timed_out_slot_takes_nothing(self):
        limiter = limiter_mod.AdaptiveLimiter(initial=1, max_limit=1)
        with limiter.slot():
            self.assertRaises(limiter_mod.LimitExceeded,
                              limiter.slot(timeout=0).__enter__)
            self.assertEqual(1, limiter.in_flight)
        self.assertEqual(0, limiter.in_flight)

    def test_release_wakes_a_waiter(self):
        limiter = limiter_mod.AdaptiveLimiter(initial=1, max_limit=1)
        token = limiter.acquire()
        got = []
        waiter = threading.Thread(
            target=lambda: got.append(limiter.acquire(timeout=30)))
        waiter.start()
        time.sleep(0.05)
        self.assertEqual([], got)
        limiter.release(token)
        waiter.join(30)
        self.assertEqual(1, len(got))
        self.assertEqual(1, limiter.in_flight)

    def test_repr(self):
        limiter = limiter_mod.AdaptiveLimiter(initial=3)
        self.assertEqual('<AdaptiveLimiter limit=3 in_flight=0>',
                         repr(limiter))


def hammer(limiter, threads, rounds, work):
    """Run ``work`` in slots from many threads.

    Returns the peak of our own count of concurrent bodies and of
    ``limiter.in_flight``.
    """
    lock = threading.Lock()
    state = {'active': 0, 'peak': 0, 'peak_in_flight': 0, 'errors': []}

    def body():
        try:
            for _ in range(rounds):
                with limiter.slot(timeout=30):
                    with lock:
                        state['active'] += 1
                        state['peak'] = max(state['peak'], state['active'])
                        state['peak_in_flight'] = max(
                            state['peak_in_flight'], limiter.in_flight)
                    work(state['active'])
                    with lock:
                        state['active'] -= 1
        except Exception as exc:  # reported by the test
            state['errors'].append(exc)

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    return state


class TestThreads(testcase.TestCase):

    def test_in_flight_never_exceeds_a_fixed_limit(self):
        limiter = limiter_mod.AdaptiveLimiter(initial=3, min_limit=3,
                                              max_limit=3)
        state = hammer(limiter, threads=12, rounds=25,
                       work=lambda n: time.sleep(0.001))
        self.assertEqual([], state['errors'])
        # Saturated (so the bound was tested) and never passed.
        self.assertEqual(3, state['peak'])
        self.assertEqual(3, state['peak_in_flight'])
        self.assertEqual(0, limiter.in_flight)

    def test_a_shrunk_limit_holds_back_new_work_until_below_it(self):
        """Work already admitted finishes; nothing new enters above the limit.

        Six slots are taken; each failed release halves the limit (6, 3,
        1), so a waiting thread stays out while work leaves and is let in
        only once in flight is below the shrunk limit. A limiter that
        counted free slots as a fixed semaphore does would admit it at the
        first release.
        """
        limiter = limiter_mod.AdaptiveLimiter(initial=6, min_limit=1,
                                              max_limit=6, backoff=0.5)
        tokens = [limiter.acquire(timeout=0) for _ in range(6)]
        limiter.release(tokens.pop(), ok=False)
        self.assertEqual(3, limiter.limit)
        self.assertEqual(5, limiter.in_flight)
        admitted = []
        waiter = threading.Thread(
            target=lambda: admitted.append(limiter.acquire(timeout=30)))
        waiter.start()
        for expected_in_flight in (4, 3):
            limiter.release(tokens.pop(), ok=False)
            self.assertEqual(expected_in_flight, limiter.in_flight)
            self.assertEqual([], admitted)
        self.assertEqual(1, limiter.limit)
        while tokens:
            limiter.release(tokens.pop(), ok=False)
        waiter.join(30)
        self.assertFalse(waiter.is_alive())
        self.assertEqual(1, len(admitted))
        self.assertEqual(1, limiter.in_flight)


class TestEventlet(testcase.TestCase):

    def test_fixed_limit_holds_under_eventlet_monkey_patching(self):
        """Green threads in a monkey-patched child, as in Nova on eventlet."""
        script = textwrap.dedent('''
            import eventlet
            eventlet.monkey_patch()
            from mlaccel import limiter as limiter_mod
            limiter = limiter_mod.AdaptiveLimiter(initial=3, min_limit=3,
                                                  max_limit=3)
            state = {'active': 0, 'peak': 0}
            def body():
                for _ in range(10):
                    with limiter.slot(timeout=30):
                        state['active'] += 1
                        state['peak'] = max(state['peak'], state['active'])
                        eventlet.sleep(0.001)
                        state['active'] -= 1
            pool = eventlet.GreenPool()
            for _ in range(12):
                pool.spawn(body)
            pool.waitall()
            print('peak=%d in_flight=%d' % (state['peak'],
                                            limiter.in_flight))
        ''')
        env = dict(os.environ, PYTHONWARNINGS='ignore')
        out = subprocess.run([sys.executable, '-c', script], env=env,
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual('peak=3 in_flight=0', out.stdout.strip())
