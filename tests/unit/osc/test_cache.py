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

"""``openstack mlaccel cache list`` through openstacksdk to a fake Cinder."""

from mlaccel.cinder import metadata
from tests.unit.osc import base

PROJECT = 'internal-tenant'
#: Cinder's endpoint, as its catalog entry names it.
ENDPOINT = '/v3/%s' % PROJECT
DETAIL = ENDPOINT + '/volumes/detail'


def volume(volume_id, image=None, host='c1@lvm#pool', **meta):
    if image is not None:
        meta[metadata.IMAGE_KEY] = image
    return {'id': volume_id, 'size': 1, 'status': 'available',
            'os-vol-host-attr:host': host, 'metadata': meta}


class CacheListTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(base.FakeAPI({('GET', DETAIL): (200, {
            'volumes': [
                volume('v-user'),
                volume('v-b', 'img-b', host='c2@lvm#pool'),
                volume('v-a2', 'img-a', host='c2@lvm#pool',
                       **{metadata.COST_KEY: '12.25'}),
                volume('v-a1', 'img-a', **{metadata.PINNED_KEY: 'true'})]})}))
        self.cloud_name = self.cloud(self.api.url + ENDPOINT)

    def list_golden(self, *extra):
        return self.openstack_json('--os-cloud', self.cloud_name, 'mlaccel',
                                   'cache', 'list', *extra)

    def test_golden_volumes_by_image_and_backend(self):
        rows = self.list_golden()
        self.assertEqual([('img-a', 'v-a1', 'c1@lvm#pool', True, 0.0),
                          ('img-a', 'v-a2', 'c2@lvm#pool', False, 12.25),
                          ('img-b', 'v-b', 'c2@lvm#pool', False, 0.0)],
                         [(r['image_id'], r['volume_id'], r['host'],
                           r['pinned'], r['fill_seconds']) for r in rows])
        self.assertEqual({'image_id', 'volume_id', 'host', 'size_gb',
                          'status', 'pinned', 'fill_seconds'}, set(rows[0]))
        self.assertEqual([('GET', DETAIL + '?limit=500')],
                         [r for r in self.api.requests if 'volumes' in r[1]])

    def test_one_image(self):
        self.assertEqual(['v-b'], [r['volume_id'] for r in self.list_golden(
            '--image', 'img-b')])

    def test_cinder_refusing_is_one_message(self):
        self.api.routes[('GET', DETAIL)] = (403, {'forbidden': {
            'message': 'Policy does not allow it', 'code': 403}})
        status, out, err = self.openstack('--os-cloud', self.cloud_name,
                                          'mlaccel', 'cache', 'list')
        self.assertEqual(1, status)
        self.assertEqual('', out)
        self.assertEqual(['listing volumes: HTTP 403: Policy does not allow '
                          'it'], err.splitlines())

    def test_credentials_are_needed(self):
        self.write('clouds.yaml', 'clouds: {}\n')
        status, out, err = self.openstack('mlaccel', 'cache', 'list')
        self.assertEqual(1, status)
        self.assertIn('auth-url', err)
        self.assertEqual([], self.api.requests)
