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

"""Nova's in-process compute API on a real loopback HTTP port, with tokens.

The harness reaches Nova's API through wsgi-intercept, which only works in
the test's own process. :class:`HTTPAPIServer` serves the same WSGI
application on ``127.0.0.1`` so that another process (the ``mlaccel``
command) can use it with openstacksdk and a ``clouds.yaml``.

Keystone cannot run here and the harness replaces keystonemiddleware with
a pass-through; :class:`TokenIdentity` stands in for token validation: a
token ``<user>:<project>`` names its user and project (user ``admin`` has
the admin role), any other token is refused with 401. Requests carrying
the harness's identity headers (``X-Auth-User``...) keep that identity.
"""

import os
import socketserver
import threading
from wsgiref import simple_server

import fixtures
from nova.api import auth as nova_auth
from nova import context as nova_context
from nova.tests import fixtures as nova_fixtures
from oslo_log import log as logging
import yaml

LOG = logging.getLogger(__name__)
USER_ROLES = ('reader', 'member')
ADMIN_ROLES = USER_ROLES + ('admin',)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class _Handler(simple_server.WSGIRequestHandler):

    def log_message(self, format, *args):
        LOG.debug('HTTP API: ' + format, *args)


class HTTPAPIServer(fixtures.Fixture):
    """Serve ``app`` on a free loopback port; ``url`` ends in ``/v2.1``.

    ``requests`` lists the ``(method, path)`` of every request served.
    """

    def __init__(self, app, api_version='v2.1'):
        super().__init__()
        self.app = app
        self.api_version = api_version
        self.requests = []

    def _record(self, environ, start_response):
        self.requests.append((environ['REQUEST_METHOD'],
                              environ.get('PATH_INFO', '')))
        return self.app(environ, start_response)

    def _setUp(self):
        server = simple_server.make_server(
            '127.0.0.1', 0, self._record, server_class=_Server,
            handler_class=_Handler)
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={'poll_interval': 0.1},
                                  name='http-api', daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(thread.join)
        self.addCleanup(server.shutdown)
        self.url = 'http://127.0.0.1:%d/%s' % (server.server_address[1],
                                               self.api_version)


class TokenIdentity(fixtures.Fixture):
    """Make Nova's API take its identity from a ``user:project`` token."""

    def _setUp(self):
        harness_context = nova_auth.NovaKeystoneContext._create_context

        def create_context(env, **kwargs):
            if 'HTTP_X_AUTH_USER' in env:
                return harness_context(env, **kwargs)
            token = env.get('HTTP_X_AUTH_TOKEN', '')
            user, sep, project = token.partition(':')
            if not (user and sep and project):
                # NovaKeystoneContext answers 401 to a context without user.
                return nova_context.RequestContext(None, None)
            roles = ADMIN_ROLES if user == 'admin' else USER_ROLES
            return nova_context.RequestContext(
                user, project, is_admin=user == 'admin', roles=list(roles),
                **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.api.auth.NovaKeystoneContext._create_context',
            create_context))


class HarnessCloud(fixtures.Fixture):
    """Nova's in-process API over HTTP, named ``harness`` in a clouds.yaml.

    ``http_api`` is the :class:`HTTPAPIServer`, ``tmp`` a private directory
    and ``clouds_yaml`` the file there; the cloud authenticates as admin of
    the harness's project through :class:`TokenIdentity`.
    """

    def __init__(self, app):
        super().__init__()
        self.app = app

    def _setUp(self):
        self.useFixture(TokenIdentity())
        self.http_api = self.useFixture(HTTPAPIServer(self.app))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.clouds_yaml = os.path.join(self.tmp, 'clouds.yaml')
        self.write_clouds('admin:%s' % nova_fixtures.PROJECT_ID)

    def write_clouds(self, token):
        """(Re)write the clouds.yaml with ``token`` as the harness's token."""
        clouds = {'clouds': {'harness': {
            'auth_type': 'admin_token',
            'auth': {'endpoint': self.http_api.url, 'token': token}}}}
        with open(self.clouds_yaml, 'w') as stream:
            yaml.safe_dump(clouds, stream)
