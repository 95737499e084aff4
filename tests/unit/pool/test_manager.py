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

"""The manager's target size: demand, bounds and capacity back-off."""

import os
import stat
import types

import fixtures

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import manager
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store

from tests import fixtures as mlaccel_fixtures
from tests import testcase

SPEC = pool_spec.PoolSpec('proj', 'img', 'flv')
GROUP = mlaccel_conf.CONF.mlaccel_pool   # window 600 s, margin 0.5


def _state(members=0, **stats):
    state = pool_store.new_state(SPEC, 1, 10, 3)
    state['stats'].update(stats)
    for i in range(members):
        state['members']['s%d' % i] = {'server_id': 's%d' % i,
                                       'state': pool_store.IDLE,
                                       'ready_at': float(i)}
    return state


class TestTarget(testcase.TestCase):

    def test_from_measured_demand_and_lead_time(self):
        # 120 VMs in 600 s = 0.2/s; 20 s lead; x1.5 -> 6.
        state = _state(arrivals=[[990.0, 120]], lead_time_s=20.0)
        self.assertEqual(6, manager.target(state, GROUP, 1000.0))

    def test_assumed_lead_time_until_measured(self):
        # 0.2/s x 60 s (default_lead_time) x 1.5 = 18 -> max 10.
        state = _state(arrivals=[[990.0, 120]])
        self.assertEqual(10, manager.target(state, GROUP, 1000.0))

    def test_no_demand_keeps_the_minimum(self):
        self.assertEqual(1, manager.target(_state(), GROUP, 1000.0))

    def test_capacity_refusal_stops_growth_until_backoff_ends(self):
        state = _state(members=2, arrivals=[[990.0, 120]],
                       lead_time_s=20.0, capacity_until=1100.0)
        self.assertEqual(2, manager.target(state, GROUP, 1000.0))
        self.assertEqual(6, manager.target(state, GROUP, 1100.0))


class TestLearning(testcase.TestCase):

    def test_a_learning_manager_makes_the_store_launchers_record_into(self):
        """No pool yet: the manager's round makes the private store."""
        directory = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'pools')
        conf = self.useFixture(mlaccel_fixtures.GlobalConf())
        conf.set('mlaccel_pool', learn=True, learn_projects=['proj'])
        pools = manager.PoolManager(None, pool_store.PoolStore(directory),
                                    mlaccel_conf.CONF, project_id='proj',
                                    image_visible=lambda image_id: True)
        pools.run_once()
        self.assertEqual(0o700, stat.S_IMODE(os.stat(directory).st_mode))
        self.assertEqual([], pools.store.keys())


class TestBackoff(testcase.TestCase):

    @staticmethod
    def group(first, longest):
        return types.SimpleNamespace(capacity_backoff_first=first,
                                     capacity_backoff=longest)

    def test_doubles_from_the_first_pause_up_to_the_longest(self):
        group = self.group(15.0, 100.0)
        self.assertEqual([0.0, 15.0, 30.0, 60.0, 100.0, 100.0],
                         [manager.backoff(group, n) for n in range(6)])

    def test_many_failed_rounds_stay_at_the_longest(self):
        self.assertEqual(300.0,
                         manager.backoff(self.group(15.0, 300.0), 10 ** 6))

    def test_no_first_pause_means_no_pause(self):
        self.assertEqual(0.0, manager.backoff(self.group(0.0, 300.0), 3))

    def test_defaults_start_short_and_end_at_five_minutes(self):
        self.assertEqual((15.0, 300.0), (manager.backoff(GROUP, 1),
                                         manager.backoff(GROUP, 9)))
