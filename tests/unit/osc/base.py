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

"""An ``openstack`` shell with mlaccel's plugin, and a fake OpenStack API.

:class:`Shell` is osc-lib's ``OpenStackShell`` loading the plugin as
python-openstackclient does: the module of the ``openstack.cli.extension``
entry point ``mlaccel``, its global options, its API version and its
``openstack.mlaccel.v<version>`` command group, from the installed
package's entry points. :class:`FakeAPI` answers HTTP requests on loopback
from a table of paths; a clouds.yaml entry with ``admin_token`` sends every
service's requests there.
"""

import http.server
import importlib.metadata
import io
import json
import logging
import os
import threading

from cliff import commandmanager
import fixtures
from osc_lib import shell as osc_shell

from mlaccel import conf as mlaccel_conf
from tests import testcase


def plugin_module():
    """The module of the ``openstack.cli.extension`` entry point mlaccel."""
    [entry] = [ep for ep in importlib.metadata.entry_points(
        group='openstack.cli.extension') if ep.name == 'mlaccel']
    return entry.load()


class _Client:
    """As OSC's ClientManager gets a plugin's client: once, lazily."""

    def __init__(self, name, factory):
        self.name = '_client_' + name
        self.factory = factory

    def __get__(self, instance, owner):
        if instance is None:
            return self
        if not hasattr(instance, self.name):
            setattr(instance, self.name, self.factory(instance))
        return getattr(instance, self.name)


class Shell(osc_shell.OpenStackShell):
    """``openstack`` with mlaccel's plugin alone."""

    NAME = 'openstack'

    def __init__(self, **kwargs):
        self.plugin = plugin_module()
        super().__init__(
            description='openstack', version='test',
            command_manager=commandmanager.CommandManager('openstack.cli'),
            **kwargs)

    def build_option_parser(self, description, version):
        parser = super().build_option_parser(description, version)
        return self.plugin.build_option_parser(parser)

    def _load_plugins(self):
        mod = self.plugin
        option = mod.API_VERSION_OPTION.replace('os_', '', 1)
        version = str(self.cloud.config.get(option, mod.DEFAULT_API_VERSION))
        if version not in mod.API_VERSIONS:
            raise ValueError('no mlaccel API version %s' % version)
        self.api_version[mod.API_NAME] = version
        self.command_manager.add_command_group(
            'openstack.%s.v%s' % (mod.API_NAME.replace('-', '_'),
                                  version.split('.')[0]))


class TestCase(testcase.TestCase):
    """Runs ``openstack ...`` in this process with a clean environment.

    No ``OS_*`` variable of the caller's is seen, clouds.yaml is the
    test's own (:meth:`cloud`), and ``mlaccel.conf.CONF`` is reset after.
    """

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        for name in [n for n in os.environ if n.startswith('OS_')
                     and n != 'OS_TEST_TIMEOUT']:
            self.useFixture(fixtures.EnvironmentVariable(name))
        self.clouds = os.path.join(self.tmp, 'clouds.yaml')
        self.write('clouds.yaml', 'clouds: {}\n')
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', self.clouds))
        plugin = plugin_module()
        self.useFixture(fixtures.MonkeyPatch(
            'osc_lib.clientmanager.ClientManager.' + plugin.API_NAME,
            _Client(plugin.API_NAME, plugin.make_client)))
        self.addCleanup(mlaccel_conf.CONF.reset)
        self.addCleanup(mlaccel_conf.CONF.clear)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as stream:
            stream.write(text)
        return path

    def cloud(self, endpoint, name='fake'):
        """A clouds.yaml entry whose every service is at ``endpoint``."""
        self.write('clouds.yaml', 'clouds:\n  %s:\n    auth_type: admin_token'
                   '\n    auth:\n      token: test-token\n'
                   '      endpoint: "%s"\n' % (name, endpoint))
        return name

    def openstack(self, *argv):
        """``(status, stdout, stderr)`` of ``openstack argv...``."""
        stdout, stderr = io.StringIO(), io.StringIO()
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        self.shell = Shell(stdout=stdout, stderr=stderr)
        try:
            status = self.shell.run(list(argv))
        except SystemExit as exc:  # a usage error, as argparse ends it
            status = exc.code
        finally:
            for handler in root.handlers[:]:
                if handler not in handlers:
                    root.removeHandler(handler)
            root.setLevel(level)
        return status, stdout.getvalue(), stderr.getvalue()

    def openstack_json(self, *argv):
        """The JSON ``openstack argv... -f json`` printed; status 0."""
        status, out, err = self.openstack(*(argv + ('-f', 'json')))
        self.assertEqual(0, status, err)
        return json.loads(out)


class FakeAPI(fixtures.Fixture):
    """An HTTP server on loopback answering from ``routes``.

    :param routes: ``{(method, path): (status, body)}``; the path without
        the query string; anything else is a 404.
    :ivar requests: ``(method, path with query)`` of each request.
    :ivar url: its base URL.
    """

    def __init__(self, routes=None):
        super().__init__()
        self.routes = dict(routes or {})
        self.requests = []

    def _setUp(self):
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):

            def _answer(self):
                api.requests.append((self.command, self.path))
                length = int(self.headers.get('Content-Length') or 0)
                if length:
                    self.rfile.read(length)
                status, body = api.routes.get(
                    (self.command, self.path.split('?')[0]),
                    (404, {'itemNotFound': {'message': 'not found',
                                            'code': 404}}))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      Handler)
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        thread = threading.Thread(target=self.server.serve_forever,
                                  daemon=True)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
