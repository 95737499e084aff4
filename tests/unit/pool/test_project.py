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

"""Which project pools act for: known, configured, or none at all."""

import types

from mlaccel.pool import claims

from tests import testcase


class Unscoped:
    """Credentials that cannot name their project."""

    @property
    def current_project_id(self):
        raise RuntimeError('no project in the token')


class TestProjectOf(testcase.TestCase):

    def test_the_credentials_project(self):
        conn = types.SimpleNamespace(current_project_id='p1')
        self.assertEqual('p1', claims.project_of(conn))
        self.assertEqual('p1', claims.project_of(conn, 'p1'))

    def test_configured_project_stands_in_for_credentials_naming_none(self):
        for conn in (Unscoped(),
                     types.SimpleNamespace(current_project_id=None)):
            self.assertEqual('p1', claims.project_of(conn, 'p1'))
            self.assertIsNone(claims.project_of(conn))

    def test_credentials_of_another_project_make_it_unknown(self):
        conn = types.SimpleNamespace(current_project_id='p2')
        self.assertIsNone(claims.project_of(conn, 'p1'))
