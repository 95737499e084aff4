# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""``mlaccel:`` flavor extra specs go through Nova's API validation."""

from nova.tests.functional.api import client

from tests.functional.scheduler import base


class ExtraSpecValidationTest(base.NovaHarnessBase):

    nova_conf = base.NOVA_CONF
    hosts = base.HOSTS[:1]

    def setUp(self):
        super().setUp()
        # Extra specs are validated from microversion 2.86 on.
        self.admin_api.microversion = '2.86'
        self.flavor = self._create_flavor(memory_mb=512, vcpu=1, disk=1,
                                          ephemeral=0)

    def test_invalid_specs_are_refused(self):
        # (key, value, what the 400 message names)
        for key, value, named in (
                ('mlaccel:nonsense', 'true', 'mlaccel:nonsense'),
                ('mlaccel:build_slots', 'sometimes', "'sometimes'"),
                ('mlaccel:image_locality', 'maybe', "'maybe'"),
                ('mlaccel:warm_start', '2', "'2'")):
            exc = self.assertRaises(
                client.OpenStackApiException, self.admin_api.post_extra_spec,
                self.flavor, {'extra_specs': {key: value}})
            self.assertEqual(400, exc.response.status_code, key)
            self.assertIn(named, exc.response.text)
        self.assertEqual({}, self.admin_api.get_extra_specs(self.flavor))

    def test_valid_specs_are_accepted_and_boot(self):
        specs = {'mlaccel:build_slots': 'ignore',
                 'mlaccel:image_locality': 'false',
                 'mlaccel:warm_start': 'true'}
        self.admin_api.post_extra_spec(self.flavor, {'extra_specs': specs})
        self.assertEqual(specs, self.admin_api.get_extra_specs(self.flavor))
        self.assertEqual(self.hosts[0],
                         self._boot(base.WANTED, flavor=self.flavor))
