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

"""Fair sharing of bandwidth among transfers, against hand computations."""

import simpy

from mlaccel_lab.experiment import bandwidth
from tests import testcase


class TestFluid(testcase.TestCase):

    def _run(self, starts):
        """``starts``: (at, size, link indexes); returns end times."""
        env = simpy.Environment()
        fluid = bandwidth.Fluid(env)
        links = [bandwidth.Link(100.0), bandwidth.Link(30.0)]
        ends = {}

        def one(index, at, size, on):
            yield env.timeout(at)
            yield fluid.transfer(size, [links[i] for i in on])
            ends[index] = env.now

        for index, (at, size, on) in enumerate(starts):
            env.process(one(index, at, size, on))
        env.run()
        return [ends[i] for i in range(len(starts))]

    def test_two_transfers_share_then_one_has_it_all(self):
        # Both at 50 B/s until the small one ends at 2 s (100 B); the
        # other has 200 B left at 100 B/s: ends at 4 s.
        ends = self._run([(0, 100, [0]), (0, 300, [0])])
        self.assertAlmostEqual(2.0, ends[0])
        self.assertAlmostEqual(4.0, ends[1])

    def test_a_late_transfer_slows_the_first(self):
        # 0..1 s alone: 100 B done, 300 left; then 50 B/s each: the late
        # one's 100 B end at 3 s, the first has 200 left, ends at 5 s.
        ends = self._run([(0, 400, [0]), (1, 100, [0])])
        self.assertAlmostEqual(3.0, ends[1])
        self.assertAlmostEqual(5.0, ends[0])

    def test_the_tightest_link_bounds_the_rate(self):
        ends = self._run([(0, 60, [0, 1]), (0, 200, [0])])
        # 60 B at min(100/2, 30/1) = 30 B/s: 2 s; the other at 50 B/s for
        # 2 s (100 B), then 100 B/s: 1 s more.
        self.assertAlmostEqual(2.0, ends[0])
        self.assertAlmostEqual(3.0, ends[1])

    def test_empty_transfer_and_bad_link(self):
        self.assertEqual([0.0], self._run([(0, 0, [0])]))
        self.assertRaises(ValueError, bandwidth.Link, 0)
        self.assertRaises(ValueError, bandwidth.Link, 1, each=0)

    def test_work_on_cores_at_a_cost_per_byte(self):
        """Two cores, one each at most: a copy costs 0.01 CPU-s a byte."""
        env = simpy.Environment()
        fluid = bandwidth.Fluid(env)
        cores = bandwidth.Link(2.0, each=1.0)
        backend = bandwidth.Link(1000.0)
        ends = {}

        def one(name, at, size, links):
            yield env.timeout(at)
            yield fluid.transfer(size, links)
            ends[name] = env.now

        # Alone, a cold start of 3 CPU-s takes one core: 3 s, though two
        # are free. A copy beside it gets the other core: 100 B/s (not
        # the backend's 1000). A second cold start at 1 s makes three
        # sharing two cores: 2/3 of a core each.
        env.process(one('cold', 0, 3.0, [(cores, 1.0)]))
        env.process(one('copy', 0, 200.0, [backend, (cores, 0.01)]))
        env.process(one('late', 1, 1.0, [(cores, 1.0)]))
        env.run()
        # 0..1 s: cold 1 CPU-s done (2 left), copy 100 B (100 left).
        # Then 2/3 core each: late's 1 CPU-s ends at 2.5 s, by when cold
        # has 1 left and copy 0 (100 B at 66.7 B/s): both at 2.5 s; cold
        # then alone at one core: 3.5 s.
        self.assertAlmostEqual(2.5, ends['late'])
        self.assertAlmostEqual(2.5, ends['copy'])
        self.assertAlmostEqual(3.5, ends['cold'])
