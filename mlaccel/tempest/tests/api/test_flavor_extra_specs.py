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

"""mlaccel's flavor extra specs are validated by Nova's API."""

from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from mlaccel.tempest.tests import base


class MlaccelExtraSpecsTest(base.MlaccelAdminTest):
    """Nova refuses bad ``mlaccel:`` extra specs.

    Validation applies from microversion 2.86 on, with the validators that
    mlaccel registers in ``nova.api.extra_spec_validators``.
    """

    min_microversion = '2.86'

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor(ram=64, vcpus=1, disk=1)
        self.client = self.admin_flavors_client

    @decorators.idempotent_id('0b5c6f0e-5f8e-4a53-9b1e-4bd1d3a3c001')
    def test_unknown_mlaccel_key_refused(self):
        self.assertRaises(lib_exc.BadRequest,
                          self.client.set_flavor_extra_spec,
                          self.flavor['id'], **{'mlaccel:no_such_key': '1'})
        specs = self.client.list_flavor_extra_specs(self.flavor['id'])
        self.assertEqual({}, specs['extra_specs'])

    @decorators.idempotent_id('0b5c6f0e-5f8e-4a53-9b1e-4bd1d3a3c002')
    def test_bad_value_refused(self):
        self.assertRaises(lib_exc.BadRequest,
                          self.client.set_flavor_extra_spec,
                          self.flavor['id'],
                          **{'mlaccel:build_slots': 'sometimes'})

    @decorators.idempotent_id('0b5c6f0e-5f8e-4a53-9b1e-4bd1d3a3c003')
    def test_valid_specs_accepted(self):
        specs = {'mlaccel:image_locality': 'false',
                 'mlaccel:build_slots': 'ignore'}
        self.client.set_flavor_extra_spec(self.flavor['id'], **specs)
        self.assertEqual(specs, self.client.list_flavor_extra_specs(
            self.flavor['id'])['extra_specs'])
