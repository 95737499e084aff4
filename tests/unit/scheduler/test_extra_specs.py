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

"""``mlaccel:`` flavor extra specs through Nova's own validator registry."""

from nova.api.validation.extra_specs import validators
from nova import exception

from mlaccel.scheduler import extra_specs
from tests import testcase
from tests.unit.scheduler import base


class TestValidators(testcase.TestCase):

    def test_valid_values_pass_novas_validation(self):
        for name, value in (('mlaccel:image_locality', 'true'),
                            ('mlaccel:image_locality', 'False'),
                            ('mlaccel:warm_start', 'yes'),
                            ('mlaccel:warm_start', '0'),
                            ('mlaccel:build_slots', 'enforce'),
                            ('mlaccel:build_slots', 'ignore')):
            validators.validate(name, value)  # raises if refused

    def test_invalid_values_are_refused(self):
        for name, value in (('mlaccel:image_locality', 'perhaps'),
                            ('mlaccel:warm_start', '2'),
                            ('mlaccel:build_slots', 'sometimes'),
                            ('mlaccel:build_slots', 'IGNORE'),
                            ('mlaccel:no_such_key', 'true')):
            self.assertRaises(exception.ValidationError,
                              validators.validate, name, value)

    def test_every_validator_is_documented(self):
        for validator in extra_specs.register():
            self.assertTrue(validator.name.startswith(extra_specs.PREFIX))
            self.assertGreater(len(validator.description), 20)


class TestPolicy(testcase.TestCase):

    def test_defaults_without_mlaccel_keys(self):
        for specs in (None, {}, {'hw:cpu_policy': 'dedicated'}):
            self.assertIs(extra_specs.DEFAULT_POLICY, extra_specs.policy(
                base.request_spec(extra_specs=specs)))
        self.assertIs(extra_specs.DEFAULT_POLICY, extra_specs.policy(None))

    def test_reads_the_flavor(self):
        policy = extra_specs.policy(base.request_spec(extra_specs={
            'mlaccel:image_locality': 'false',
            'mlaccel:build_slots': 'ignore',
            'mlaccel:warm_start': 'no'}))   # deprecated, ignored
        self.assertEqual(extra_specs.Policy(False, False), policy)

    def test_unreadable_values_take_the_default(self):
        policy = extra_specs.policy(base.request_spec(extra_specs={
            'mlaccel:image_locality': 'perhaps',
            'mlaccel:build_slots': 'sometimes'}))
        self.assertEqual(extra_specs.DEFAULT_POLICY, policy)
