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

"""``openstack mlaccel launch``: the launcher's code on OSC's connection.

A fake Nova on loopback knows no flavor, so every launch here fails at its
first lookup, through the launcher's own path: the record is made, shown,
written with ``--output``, and no server is ever asked for.
"""

import json
import os
import signal

from tests.unit.osc import base

UUID = '7b6b2e4e-4d7e-4b8e-9a51-2f0c0f0c0f01'


class LaunchCommandTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(base.FakeAPI())
        self.cloud_name = self.cloud(self.api.url + '/v2.1')
        self.conf = self.write(
            'mlaccel.conf', '[mlaccel_pool]\nstate_dir = %s\n'
            '[mlaccel_launcher]\nlisten_host = 127.0.0.1\n'
            % os.path.join(self.tmp, 'pools'))

    def launch(self, *extra, conf=True):
        argv = ['--os-cloud', self.cloud_name, 'mlaccel', 'launch',
                '--image', UUID, '--flavor', 'm1.small', '--task', 'clip',
                '--timeout', '60']
        if conf:
            argv += ['--config-file', self.conf]
        return self.openstack(*(argv + list(extra)))

    def assert_nothing_asked(self):
        self.assertEqual([], self.api.requests)

    def test_a_failed_launch_shows_and_writes_its_record(self):
        output = os.path.join(self.tmp, 'record.json')
        previous = signal.getsignal(signal.SIGTERM)
        status, out, err = self.launch('--output', output, '--count', '2',
                                       '-f', 'json')
        self.assertEqual(1, status, err)
        shown = json.loads(out)
        with open(output) as stream:
            written = json.load(stream)
        self.assertEqual(written['launch_id'], shown['launch_id'])
        self.assertEqual(('failed', UUID, 'm1.small', 2, 'clip'),
                         (shown['outcome'], shown['image'], shown['flavor'],
                          shown['count'], shown['task']))
        self.assertIn('flavors', shown['error'])
        self.assertEqual(2, len(shown['vms']))
        self.assertEqual([], shown['cleanup']['leaked'])
        self.assertIn('failed: ', err)
        self.assertTrue(any('/flavors/' in path
                            for _, path in self.api.requests))
        self.assertNotIn('POST', [method for method, _ in self.api.requests])
        self.assertIs(previous, signal.getsignal(signal.SIGTERM))
        # The record it wrote is one "record show" shows alike.
        self.assertEqual(shown, self.openstack_json(
            'mlaccel', 'record', 'show', output))

    def test_bad_configuration_asks_nothing(self):
        bad = self.write('bad.conf', '[mlaccel_launcher]\n'
                         'initial_parallelism = many\n')
        for conf, word in ((os.path.join(self.tmp, 'nope.conf'), 'nope.conf'),
                           (bad, 'initial_parallelism')):
            status, out, err = self.launch('--config-file', conf, conf=False)
            self.assertEqual(1, status)
            self.assertEqual('', out)
            self.assertIn(word, err)
        self.assert_nothing_asked()

    def test_an_unwritable_output_asks_nothing(self):
        status, out, err = self.launch(
            '--output', os.path.join(self.tmp, 'no', 'record.json'))
        self.assertEqual(1, status)
        self.assertIn('cannot write in', err)
        self.assert_nothing_asked()

    def test_usage_errors_as_the_script_s(self):
        for extra in (['--task-args', '[1]'], ['--count', '0'],
                      ['--cloud', 'x'], ['--listen', 'nohost']):
            status, out, err = self.launch(*extra)
            self.assertEqual(2, status, extra)
        self.assert_nothing_asked()
