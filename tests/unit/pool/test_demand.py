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

"""The demand record on a real pool store: bounded, per project, shared."""

import os
import threading

import fixtures

from mlaccel.pool import demand
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from tests import testcase

SPEC = pool_spec.PoolSpec('proj', 'img', 'flv', preload=['json'])
OTHER = pool_spec.PoolSpec('proj', 'img2', 'flv')


class DemandLogTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger(name='mlaccel'))
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'pools')
        self.store = pool_store.PoolStore(self.dir)
        self.log = demand.DemandLog(self.store, max_records=5,
                                    max_age=100.0)

    def test_outcomes(self):
        self.assertEqual(demand.HIT, demand.outcome(3, 3))
        self.assertEqual(demand.PARTIAL, demand.outcome(3, 1))
        self.assertEqual(demand.MISS, demand.outcome(3, 0))

    def test_asks_and_fresh_overheads_are_kept_with_the_spec(self):
        self.log.record_ask(SPEC, 2, 0, now=10.0)
        self.log.record_fresh(SPEC, [30.0, 50.0], now=11.0)
        self.log.record_ask(SPEC, 1, 1, now=12.0)
        doc = self.log.read('proj')
        self.assertEqual([[10.0, SPEC.key, 2, 0], [12.0, SPEC.key, 1, 1]],
                         doc['asks'])
        entry = doc['keys'][SPEC.key]
        self.assertEqual(2, entry['fresh_samples'])
        # 30, then 20 % of the way to 50.
        self.assertAlmostEqual(34.0, entry['fresh_overhead_s'])
        self.assertEqual(SPEC, demand.spec_of(doc, SPEC.key))

    def test_bounded_by_count_and_by_age(self):
        for i in range(8):
            self.log.record_ask(SPEC, 1, 0, now=float(i))
        self.assertEqual([3.0, 4.0, 5.0, 6.0, 7.0],
                         [a[0] for a in self.log.read('proj')['asks']])
        # The record begins with the oldest ask kept.
        self.assertEqual(3.0, demand.recorded_since(self.log.read('proj')))
        self.assertIsNone(demand.recorded_since(demand.empty('proj')))
        self.log.record_ask(OTHER, 1, 0, now=150.0)
        doc = self.log.read('proj')
        self.assertEqual([[150.0, OTHER.key, 1, 0]], doc['asks'])
        # A key none of whose asks is kept is forgotten with its overhead.
        self.assertEqual([OTHER.key], list(doc['keys']))

    def test_a_fresh_overhead_of_a_key_never_asked_for_is_dropped(self):
        self.log.record_fresh(SPEC, [5.0], now=1.0)
        self.assertEqual({}, self.log.read('proj')['keys'])

    def test_projects_are_kept_apart_and_are_not_pools(self):
        self.log.record_ask(SPEC, 1, 0, now=1.0)
        theirs = pool_spec.PoolSpec('a project/with odd id', 'img', 'flv')
        self.log.record_ask(theirs, 4, 0, now=1.0)
        self.assertEqual(1, len(self.log.read('proj')['asks']))
        self.assertEqual(4, self.log.read(theirs.project_id)['asks'][0][2])
        self.assertEqual([], self.log.read('nobody')['asks'])
        self.assertEqual([], self.store.keys())

    def test_bad_values_are_refused_and_nothing_is_written(self):
        self.assertRaises(ValueError, self.log.record_ask, SPEC, 0, 0)
        self.assertRaises(ValueError, self.log.record_ask, SPEC, 1, 2)
        self.assertRaises(ValueError, self.log.record_fresh, SPEC, [-1.0])
        self.assertRaises(ValueError, demand.DemandLog, self.store, 0)
        self.assertEqual([], self.log.read('proj')['asks'])

    def test_the_day_s_spend_is_kept_and_counted(self):
        day = demand.DAY
        self.log.record_spend('proj', 2, now=1000.0)
        self.log.record_spend('proj', 3, now=1600.0)
        doc = self.log.read('proj')
        self.assertEqual(3, demand.holding(doc))
        # 2 members for 600 s, then 3 until now.
        self.assertEqual(2 * 600.0 + 3 * 400.0, demand.spent(doc, 2000.0))
        self.assertEqual(3 * 100.0, demand.spent(doc, 2000.0, window=100.0))
        # The record survives a reader's restart: it is in the store.
        again = demand.DemandLog(self.store).read('proj')
        self.assertEqual(doc['spend'], again['spend'])
        # Only changes are kept; only the last day (and the change before
        # it, which still holds at its start).
        doc = demand.empty('proj')
        for i in range(100):
            demand.add_spend(doc, i * 3600.0, i % 2)
        demand.add_spend(doc, 100 * 3600.0, 1)
        self.assertLessEqual(len(doc['spend']), 26)
        self.assertEqual(12 * 3600.0,
                         demand.spent(doc, 100 * 3600.0, window=day))
        self.assertRaises(ValueError, demand.add_spend, doc, 0.0, -1)
        self.assertEqual(0.0, demand.spent(demand.empty('p'), 1e6))

    def test_what_leaves_the_day_as_it_moves_on(self):
        doc = demand.empty('proj')
        demand.add_spend(doc, 0.0, 2)
        demand.add_spend(doc, 300.0, 5)
        now = demand.DAY + 100.0
        # The day ending now began at 100: 2 members until 300, then 5.
        self.assertEqual([(200.0, 2 * 200.0), (600.0, 2 * 200.0 + 5 * 400.0)],
                         demand.leaving(doc, now, 600.0))
        self.assertEqual([(600.0, 0.0)],
                         demand.leaving(demand.empty('p'), now, 600.0))

    def test_another_version_starts_again(self):
        key = demand.document_key('proj')
        with self.store.transaction(key, create={'version': 99},
                                    suffix=demand.SUFFIX):
            pass
        self.log.record_ask(SPEC, 1, 0, now=1.0)
        doc = self.log.read('proj')
        self.assertEqual(demand.VERSION, doc['version'])
        self.assertEqual(1, len(doc['asks']))
        self.assertIn('had version 99', self.logger.output)

    def test_concurrent_launchers_lose_no_ask(self):
        log = demand.DemandLog(self.store, max_records=1000)

        def launcher(n):
            for i in range(20):
                log.record_ask(SPEC, 1, 0, now=1000.0 + n * 100 + i)

        threads = [threading.Thread(target=launcher, args=(n,))
                   for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(80, len(log.read('proj')['asks']))
