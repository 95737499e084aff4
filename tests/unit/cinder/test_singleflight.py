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

import threading


from mlaccel.cinder import singleflight

from tests import testcase


class SingleFlightTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.flights = singleflight.SingleFlight()
        self.release = threading.Event()
        self.calls = 0

    def _work(self):
        self.calls += 1
        self.release.wait(30)
        return 'golden'

    def _run_many(self, n, fn):
        results, errors = [], []

        def one():
            try:
                results.append(self.flights.do('img', fn, timeout=30))
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        # Let the leader in and the others join before releasing it.
        for _ in range(3000):
            if self.flights.joined('img') == n - 1:
                break
            threading.Event().wait(0.01)
        self.assertEqual(n - 1, self.flights.joined('img'))
        self.release.set()
        for t in threads:
            t.join()
        return results, errors

    def test_one_call_for_concurrent_callers(self):
        results, errors = self._run_many(8, self._work)
        self.assertEqual([], errors)
        self.assertEqual(1, self.calls)
        self.assertEqual(['golden'] * 8, [r for r, _ in results])
        self.assertEqual(1, sum(1 for _, leader in results if leader))
        self.assertFalse(self.flights.in_flight('img'))

    def test_error_reaches_every_caller_and_clears_the_key(self):
        def broken():
            self._work()
            raise IOError('download broke')

        results, errors = self._run_many(4, broken)
        self.assertEqual([], results)
        self.assertEqual(4, len(errors))
        self.assertFalse(self.flights.in_flight('img'))
        self.assertEqual(('x', True), self.flights.do('img', lambda: 'x'))

    def test_waiter_times_out(self):
        started = threading.Event()

        def slow():
            started.set()
            self.release.wait(30)

        leader = threading.Thread(target=self.flights.do, args=('img', slow))
        leader.start()
        started.wait(30)
        self.assertRaises(singleflight.FlightTimeout, self.flights.do,
                          'img', slow, timeout=0.01)
        self.release.set()
        leader.join()
