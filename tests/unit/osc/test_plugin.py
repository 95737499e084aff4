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

"""The plugin as OSC loads it: entry points, commands, client, help."""

import importlib.metadata

import openstack

from mlaccel.osc import cache
from mlaccel.osc import hostreport
from mlaccel.osc import launch
from mlaccel.osc import plugin
from mlaccel.osc import pool
from mlaccel.osc import record
from tests.unit.osc import base

COMMANDS = {
    'mlaccel launch': launch.Launch,
    'mlaccel pool list': pool.ListPool,
    'mlaccel pool show': pool.ShowPool,
    'mlaccel record show': record.ShowRecord,
    'mlaccel cache list': cache.ListCache,
    'mlaccel host report list': hostreport.ListHostReport,
}


class PluginTest(base.TestCase):

    def test_entry_points_resolve(self):
        self.assertIs(plugin, base.plugin_module())
        found = {ep.name: ep.load() for ep in importlib.metadata.entry_points(
            group='openstack.mlaccel.v1')}
        self.assertEqual({name.replace(' ', '_'): cls
                          for name, cls in COMMANDS.items()}, found)

    def test_plugin_interface(self):
        self.assertEqual('mlaccel', plugin.API_NAME)
        self.assertEqual('os_mlaccel_api_version', plugin.API_VERSION_OPTION)
        self.assertIn(plugin.DEFAULT_API_VERSION, plugin.API_VERSIONS)

    def test_commands_are_found_by_their_names(self):
        self.openstack('--os-mlaccel-api-version', '1', 'help')
        for name, cls in COMMANDS.items():
            factory, found, rest = self.shell.command_manager.find_command(
                name.split() + ['x'])
            self.assertIs(cls, factory)
            self.assertEqual((name, ['x']), (found, rest))

    def test_each_command_has_help(self):
        for name in COMMANDS:
            status, out, err = self.openstack(*name.split(), '--help')
            self.assertEqual(0, status, err)
            self.assertIn('usage: openstack %s' % name, out)
            self.assertEqual(
                cls_doc(COMMANDS[name]), out.split('\n\n')[1].strip())

    def test_launch_takes_the_scripts_options_but_the_cloud(self):
        status, out, err = self.openstack('mlaccel', 'launch', '--help')
        for option in ('--image', '--flavor', '--count', '--task-args',
                       '--no-pool', '--keep-servers', '--listen', '--output',
                       '--config-file'):
            self.assertIn(option, out)
        for option in ('--cloud', '--debug', '--quiet'):
            self.assertNotIn(option + ' ', out)

    def test_make_client_is_the_sdk_connection(self):
        api = self.useFixture(base.FakeAPI())
        cloud = self.cloud(api.url)
        self.openstack('--os-cloud', cloud, 'mlaccel', 'cache', 'list')
        manager = self.shell.client_manager
        self.assertIsInstance(manager.mlaccel, openstack.connection.Connection)
        self.assertIs(manager.sdk_connection, manager.mlaccel)


def cls_doc(cls):
    return cls.__doc__.strip().splitlines()[0]
