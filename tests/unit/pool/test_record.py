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

"""A pooled VM's life-cycle record: its clock starts at the claim."""


from mlaccel.launcher import record

from tests import testcase


class PooledRecordTest(testcase.TestCase):

    def test_buffering_runs_from_the_claim(self):
        # Built long ago (Nova's times), claimed at 1000, first step 1000.3.
        observed = {'requested': 1000.0, 'claimed': 1000.0,
                    'active_seen': 1000.0,
                    'nova': {'build_started': 10.0, 'built': 40.0,
                             'precision': 1.0},
                    'notified': {'scheduled': 9.0, 'active': 39.0},
                    'first_step_at': 1000.3, 'finished_at': 1002.0}
        durations = record.vm_timeline('vm0', observed).to_dict()[
            'durations']
        self.assertEqual(0.0, durations['scheduling'])
        self.assertEqual(0.0, durations['creation'])
        self.assertAlmostEqual(0.3, durations['buffering'])
        self.assertAlmostEqual(1.7, durations['running'])

    def test_table_says_where_the_vm_came_from(self):
        rec = record.build('abc', {}, [{
            'name': 'vm0', 'state': 'succeeded', 'pool': 'k',
            'observed': {'requested': 5.0, 'claimed': 5.0,
                         'first_step_at': 5.5, 'finished_at': 6.0}}],
            'succeeded')
        table = record.format_table(rec)
        self.assertIn('vm0: active from launcher claimed from a warm pool',
                      table)

    def test_fresh_vm_unchanged(self):
        observed = {'requested': 100.0, 'claimed': None,
                    'notified': {'scheduled': 101.0, 'active': 104.0},
                    'first_step_at': 106.0, 'finished_at': 110.0}
        durations = record.vm_timeline('vm0', observed).to_dict()[
            'durations']
        self.assertEqual(1.0, durations['scheduling'])
        self.assertEqual(3.0, durations['creation'])
        self.assertEqual(2.0, durations['buffering'])
