"""A pooled VM's life-cycle record: its clock starts at the claim."""

import testtools

from mlaccel.launcher import record


class PooledRecordTest(testtools.TestCase):

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
