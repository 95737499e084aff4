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

"""``openstack mlaccel record show`` on records the launcher's code writes."""

import os

from mlaccel.launcher import record as launch_record
from tests.unit.osc import base


def _record():
    """Two VMs: vm0 with every preferred source, vm1 with fallbacks."""
    notified = {'scheduled': 102.25, 'active': 105.5, 'build_started': None,
                'failed': None, 'builds': 1}
    nova = {'requested': None, 'scheduled': None, 'build_started': 103.0,
            'built': 108.0, 'build_result': 'Success', 'precision': 1.0}
    vms = [{'name': 'vm0', 'server_id': 'srv0', 'state': 'succeeded',
            'observed': {'requested': 100.0, 'notified': notified,
                         'first_step_at': 110.0, 'finished_at': 130.0}},
           {'name': 'vm1', 'server_id': 'srv1', 'state': 'succeeded',
            'observed': {'requested': 100.5, 'nova': nova,
                         'started_at': 111.0, 'finished_at': 131.0}}]
    request = {'image': 'img', 'flavor': 'm1.small', 'count': 2,
               'entry': 'clip', 'args': {}, 'network': 'none',
               'server_group': None, 'timeout': 60.0}
    return launch_record.build('launch-1', request, vms, 'succeeded',
                               cleanup={'deleted': ['srv0', 'srv1'],
                                        'leaked': []})


class RecordShowTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.record = _record()
        self.path = os.path.join(self.tmp, 'record.json')
        launch_record.write_json(self.record, self.path)

    def test_json_holds_the_record_s_figures(self):
        shown = self.openstack_json('mlaccel', 'record', 'show', self.path)
        task = self.record['timeline']
        self.assertEqual(('launch-1', 'succeeded', None, 'img', 'm1.small',
                          2, 'clip'),
                         (shown['launch_id'], shown['outcome'],
                          shown['error'], shown['image'], shown['flavor'],
                          shown['count'], shown['task']))
        for stage in ('scheduling', 'creation', 'buffering', 'running'):
            self.assertEqual(task['durations'][stage], shown[stage])
        self.assertEqual(task['total'], shown['total'])
        self.assertEqual(['vm0', 'vm1'], [vm['name'] for vm in shown['vms']])
        self.assertEqual(2.25, shown['vms'][0]['scheduling'])
        self.assertEqual(2.5, shown['vms'][1]['scheduling'])
        self.assertEqual({'deleted': ['srv0', 'srv1'], 'leaked': []},
                         shown['cleanup'])
        # vm1's scheduled, active and started came from fallbacks.
        self.assertEqual(['vm1: scheduled', 'vm1: active', 'vm1: started'],
                         [line.split(' from ')[0]
                          for line in shown['fallbacks']])

    def test_table_as_mlaccel_launch_prints_it(self):
        status, out, err = self.openstack('mlaccel', 'record', 'show',
                                          self.path)
        self.assertEqual(0, status, err)
        table = launch_record.format_table(self.record)
        # Every fallback note of the script's table is shown.
        for note in table.splitlines()[-3:]:
            self.assertIn(note, out)
        self.assertIn('vm0: scheduling 2.250, creation 3.250, buffering '
                      '4.500, running 20.000, total 30.000 s; succeeded', out)

    def test_not_a_record(self):
        for name, text, words in (
                ('missing.json', None, ('cannot read', 'No such file')),
                ('bad.json', '{', ('not JSON',)),
                ('list.json', '[1]', ('not a life-cycle record',)),
                ('other.json', '{"launch_id": "x"}',
                 ('not a life-cycle record',))):
            path = os.path.join(self.tmp, name)
            if text is not None:
                self.write(name, text)
            status, out, err = self.openstack('mlaccel', 'record', 'show',
                                              path)
            self.assertEqual(1, status, name)
            self.assertEqual('', out)
            self.assertEqual(1, len(err.splitlines()), err)
            for word in words:
                self.assertIn(word, err)
