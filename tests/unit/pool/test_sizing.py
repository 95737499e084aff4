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

"""Pool sizing: Little's law on measured arrivals, between the bounds."""


from mlaccel.pool import sizing

from tests import testcase


class TestSizing(testcase.TestCase):

    def test_littles_law_with_margin(self):
        # 0.5 VM/s arriving, 20 s to refill: 10 in flight, +50 % -> 15.
        self.assertEqual(15, sizing.target_size(0.5, 20.0, 0.5, 0, 100))
        self.assertEqual(10, sizing.target_size(0.5, 20.0, 0.0, 0, 100))
        self.assertEqual(1, sizing.target_size(0.01, 20.0, 0.0, 0, 100))

    def test_bounds(self):
        self.assertEqual(2, sizing.target_size(0.0, 20.0, 0.5, 2, 5))
        self.assertEqual(5, sizing.target_size(9.0, 20.0, 0.5, 2, 5))
        self.assertEqual(0, sizing.target_size(0.0, 0.0, 0.5, 0, 5))
        self.assertRaises(ValueError, sizing.target_size, 1, 1, 0, 3, 2)
        self.assertRaises(ValueError, sizing.target_size, 1, 1, 0, -1, 2)

    def test_arrival_rate_counts_vms_in_the_window(self):
        arrivals = [[100.0, 4], [150.0, 2], [195.0, 4]]
        self.assertEqual(10 / 100.0, sizing.arrival_rate(arrivals, 199, 100))
        self.assertEqual(6 / 50.0, sizing.arrival_rate(arrivals, 199, 50))
        self.assertEqual(0.0, sizing.arrival_rate(arrivals, 400, 100))
        self.assertEqual([[150.0, 2], [195.0, 4]],
                         sizing.prune(arrivals, 199, 50))
        self.assertRaises(ValueError, sizing.arrival_rate, arrivals, 1, 0)

    def test_demand_falling_shrinks_the_target(self):
        arrivals = [[float(t), 1] for t in range(0, 100, 2)]
        busy = sizing.target_size(sizing.arrival_rate(arrivals, 100, 60),
                                  10.0, 0.5, 0, 50)
        quiet = sizing.target_size(sizing.arrival_rate(arrivals, 200, 60),
                                   10.0, 0.5, 0, 50)
        self.assertEqual(8, busy)
        self.assertEqual(0, quiet)

    def test_lead_time_is_smoothed(self):
        self.assertEqual(10.0, sizing.lead_time(None, 10.0))
        self.assertAlmostEqual(13.0, sizing.lead_time(10.0, 20.0))
