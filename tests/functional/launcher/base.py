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

"""Nova's in-process services with task daemon guests, for launcher tests.

Real parts: Nova's API (wsgi-intercept catches openstacksdk's requests),
conductor, scheduler, placement and compute services; one real
``mlaccel-taskd`` process per server, started by
:mod:`tests.functional.launcher.guest` in place of the guest that Nova's
fake hypervisor cannot boot.
"""

import os
import sys
import time

import fixtures
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import integrated_helpers
import openstack.connection

from mlaccel.launcher import api
from tests.functional import cell_lock
from tests.functional.launcher import guest
from tests.functional.launcher import httpapi

# Before any harness is made: see tests.functional.cell_lock.
cell_lock.install()

IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'  # nova's GlanceFixture image1
FLAVOR = 'm1.tiny'
ECHO = 'tests.functional.launcher.tasks:echo'
FAIL = 'tests.functional.launcher.tasks:fail'
WAIT_FOR_FILE = 'tests.functional.launcher.tasks:wait_for_file'


class LauncherTestCase(integrated_helpers.ProviderUsageBaseTestCase):
    """One compute (``host1``) and ``self.conn``, an admin connection."""

    # Nova loads drivers from its own package only: the fake driver's name
    # is patched to point at the subclass booting local task daemons.
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.fake.MediumFakeDriver', guest.TaskdGuestDriver))
        super().setUp()
        # The harness validates API responses strictly ("error"), and the
        # detail of a server buried in cell0 (e.g. over quota) fails that
        # check at the latest microversion. Deployments default to "warn".
        self.flags(response_validation='warn', group='api')
        self._start_compute('host1')
        self.addCleanup(guest.shutdown_all)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.functional.launcher.guest.FAIL_SPAWN', set()))
        session = ks_session.Session(
            auth=noauth.NoAuth(), additional_headers={
                'X-Auth-User': 'admin',
                'X-Auth-Project-Id': nova_fixtures.PROJECT_ID,
                'X-Roles': ','.join(httpapi.ADMIN_ROLES)})
        self.conn = openstack.connection.Connection(
            session=session,
            compute_endpoint_override=self.api_fixture.base_url)

    def _launch(self, count, entry=ECHO, **kwargs):
        kwargs.setdefault('timeout', 40)
        return api.launch(self.conn, IMAGE, FLAVOR, count, entry,
                          {'x': 1}, listen_host='127.0.0.1',
                          preload=['json'], poll_interval=0.5,
                          delete_timeout=60, **kwargs)

    def _assert_nothing_left(self):
        # DELETED: destroyed, its row not yet marked deleted (milliseconds).
        self.assertEqual([], [s.id for s in self.conn.compute.servers()
                              if s.status != 'DELETED'])
        self.assertEqual({}, guest.GUESTS)

    def _wait_until(self, predicate, what, timeout=60.0):
        """Wait for ``predicate()`` (Nova finishing work); fail on timeout."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(0.2)
