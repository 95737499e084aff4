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

"""``openstack mlaccel host report list`` on a real file state bus."""

import time

from mlaccel import hostreport
from mlaccel.statebus import publisher
from tests import fixtures as mlaccel_fixtures
from tests.unit.osc import base


def report(host, **fields):
    return hostreport.HostReport(host, timestamp=time.time(), **fields)


class HostReportListTest(base.TestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(mlaccel_fixtures.Conf()).conf
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(conf))
        self.conf = self.write(
            'mlaccel.conf', '[mlaccel_statebus]\nbackend_url = %s\n'
            'deployment_key_file = %s\n'
            % (self.bus.url, conf.mlaccel_statebus.deployment_key_file))

    def list_reports(self, *extra):
        return self.openstack_json('mlaccel', 'host', 'report', 'list',
                                   '--config-file', self.conf, *extra)

    def test_signed_reports_with_their_key(self):
        for i in range(2):
            self.bus.publisher('cmp%d' % i).publish(report(
                'cmp%d' % i, cached_images=frozenset({'img-a', 'img-b'}),
                builds_in_flight=i, build_limit=4))
        rows = self.list_reports()
        key_id = self.bus.deployment_keys[0].id
        self.assertEqual(
            [('cmp0', True, 2, 0, 4, key_id), ('cmp1', True, 2, 1, 4, key_id)],
            [(r['host'], r['fresh'], r['images'], r['builds'], r['limit'],
              r['key_id']) for r in rows])
        self.assertTrue(all(0 <= r['age_s'] < 60 for r in rows), rows)
        self.assertNotIn('agent_version', rows[0])
        [row, _] = self.list_reports('--long')
        self.assertEqual(0, row['cache_free_bytes'])
        self.assertIn('agent_version', row)

    def test_a_report_signed_with_another_key_is_not_listed(self):
        self.bus.publisher('cmp0').publish(report('cmp0'))
        other = self.useFixture(mlaccel_fixtures.StateBus(
            self.useFixture(mlaccel_fixtures.Conf()).conf))
        # cmp1's publisher signs with the keys of another deployment.
        intruder = publisher.Publisher(
            'cmp1', self.bus.conf, host_keys=other.host_keys('cmp1'))
        self.addCleanup(intruder.stop)
        intruder.start()
        intruder.publish(report('cmp1'))
        self.assertEqual(['cmp0'], [r['host'] for r in self.list_reports()])

    def test_an_empty_bus(self):
        self.assertEqual([], self.list_reports())

    def test_an_unreadable_bus_hides_its_password(self):
        conf = self.write('other.conf', '[mlaccel_statebus]\nbackend_url = '
                          'nosuch://u:pw-secret@127.0.0.1/x\n'
                          'allow_unsigned_reports = true\n')
        status, out, err = self.openstack(
            'mlaccel', 'host', 'report', 'list', '--config-file', conf)
        self.assertEqual(1, status)
        self.assertEqual('', out)
        self.assertIn('cannot be read', err)
        self.assertNotIn('pw-secret', err)

    def test_no_key_no_reports(self):
        conf = self.write('nokey.conf', '[mlaccel_statebus]\nbackend_url = '
                          '%s\n' % self.bus.url)
        self.bus.publisher('cmp0').publish(report('cmp0'))
        status, out, err = self.openstack(
            'mlaccel', 'host', 'report', 'list', '--config-file', conf)
        self.assertEqual(1, status)
        self.assertIn('deployment_key_file', err)
