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

"""The devstack plugin's phases, run against the test cloud's config files.

devstack itself is not installed here: ``devstack_shim.sh`` stands in for
the few devstack functions the plugin calls (installing software is only
recorded; ini edits are real). Everything else is real: the plugin's shell
code, the ``mlaccel-config`` command it runs, the files of the all-in-one
cloud (written by the harness, without mlaccel), and Nova's own filter and
weigher loaders reading the result.
"""

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys

import fixtures
from oslo_config import cfg
import testtools

from mlaccel.cmd import cinder_config
from mlaccel.cmd import config as mlaccel_config
from mlaccel import inifile
from mlaccel.statebus import keys
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import layout as aio_layout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PLUGIN = os.path.join(ROOT, 'devstack')
SHIM = os.path.join(HERE, 'devstack_shim.sh')
PHASES = [('stack', 'install'), ('stack', 'post-config'), ('stack', 'extra'),
          ('stack', 'test-config'), ('unstack',), ('clean',)]


class DevstackPluginPhasesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.lay = aio_layout.Layout(
            os.path.join(self.tmp, 'aio'),
            aio_layout.Settings(computes=2, cinder=True, mlaccel=False))
        configs.write_all(self.lay)
        self.nova_conf = self.lay.path('etc', 'nova', 'nova.conf')
        # A compute's nova-cpu.conf, which devstack copies from nova.conf.
        self.nova_cpu_conf = self.lay.path('etc', 'nova',
                                           'compute-aio1.conf')
        self.cinder_conf = self.lay.path('etc', 'cinder', 'cinder.conf')
        self.as_devstack_writes_them()
        self.tempest_conf = os.path.join(self.tmp, 'tempest.conf')
        with open(self.tempest_conf, 'w') as f:
            f.write('[service_available]\nnova = True\n')
        self.calls = os.path.join(self.tmp, 'calls')
        self.statebus = os.path.join(self.tmp, 'data', 'mlaccel', 'statebus')
        self.conf_dir = os.path.join(self.tmp, 'etc-mlaccel')
        self.deployment_key = os.path.join(self.conf_dir, 'statebus',
                                           'deployment.key')
        self.host_key = os.path.join(self.conf_dir, 'statebus', 'host.key')

    def as_devstack_writes_them(self):
        """No mlaccel settings yet; devstack's own notification settings."""
        for path in (self.nova_conf, self.cinder_conf):
            ini = inifile.IniFile(path)
            for key in ('backend_url', 'deployment_key_file',
                        'host_key_file'):
                ini.set('mlaccel_statebus', key, [])
            ini.set('oslo_messaging_notifications', 'driver', ['messagingv2'])
            if path == self.nova_conf:
                ini.set('notifications', 'notification_format',
                        ['unversioned'])
            ini.save()

    def phase(self, *args, services='n-api,n-sch,n-cpu,c-vol,tempest',
              status=0, **settings):
        env = dict(
            os.environ, **settings,
            SHIM_CALLS=self.calls, SHIM_PYTHON=sys.executable,
            MLACCEL_BIN_DIR=os.path.dirname(sys.executable),
            ENABLED_SERVICES=services,
            DEST=self.tmp, DATA_DIR=os.path.join(self.tmp, 'data'),
            STACK_USER=pwd.getpwuid(os.geteuid()).pw_name,
            MLACCEL_CONF_DIR=self.conf_dir, NOVA_CONF=self.nova_conf,
            NOVA_CPU_CONF=self.nova_cpu_conf,
            CINDER_CONF=self.cinder_conf, TEMPEST_CONFIG=self.tempest_conf)
        script = ('set -eu -o pipefail; source "%s"; source "%s/settings"; '
                  'source "%s/plugin.sh" "$@"' % (SHIM, PLUGIN, PLUGIN))
        proc = subprocess.run(['bash', '-c', script, 'plugin'] + list(args),
                              env=env, capture_output=True, text=True)
        self.assertEqual(status, proc.returncode,
                         'phase %s:\n%s' % (args, proc.stderr[-1500:]))
        return proc

    def read(self, path):
        with open(path) as f:
            return f.read()

    def test_phases(self):
        expected = os.path.join(self.tmp, 'expected-nova.conf')
        shutil.copy(self.nova_conf, expected)

        self.phase('stack', 'install')
        self.assertIn('setup_develop %s/mlaccel' % self.tmp,
                      self.read(self.calls))

        self.phase('stack', 'post-config')
        # What the harness makes of the same file with the same command.
        self.assertEqual(0, mlaccel_config.main([
            'enable', '--nova-conf', expected, '--statebus-url',
            'file://' + self.statebus,
            '--statebus-deployment-key-file', self.deployment_key,
            '--statebus-host-key-file', self.host_key]))
        self.assertEqual(self.read(expected), self.read(self.nova_conf))
        self.assertTrue(os.path.isdir(self.statebus))
        cinder = inifile.IniFile(self.cinder_conf)
        self.assertEqual(['file://' + self.statebus],
                         cinder.get('mlaccel_statebus', 'backend_url'))
        self.assertEqual([self.deployment_key], cinder.get(
            'mlaccel_statebus', 'deployment_key_file'))
        self.assert_keys()
        before = [self.read(path) for path in (
            self.nova_conf, self.deployment_key, self.host_key)]
        self.phase('stack', 'post-config')
        self.assertEqual(before, [self.read(path) for path in (
            self.nova_conf, self.deployment_key, self.host_key)])
        self.assert_nova_loads_plugins()
        self.assert_nova_sends_versioned_notifications()

        self.phase('stack', 'extra')
        self.assert_agent_runs()
        unit = self.read(os.path.join(self.conf_dir, 'guest',
                                      'mlaccel-taskd.service'))
        self.assertIn('ExecStart=', unit)
        self.assertTrue(self.read(os.path.join(
            self.conf_dir, 'guest', 'user-data.yaml')).startswith(
                '#cloud-config'))

        self.phase('stack', 'test-config')
        tempest = inifile.IniFile(self.tempest_conf)
        self.assertEqual(['True'], tempest.get('service_available',
                                               'mlaccel'))
        self.assertEqual(['True'], tempest.get('service_available', 'nova'))
        self.assertEqual(['file://' + self.statebus],
                         tempest.get('mlaccel', 'statebus_url'))
        self.assertIn('BuildSlotFilter', tempest.get(
            'compute-feature-enabled', 'scheduler_enabled_filters')[0])

        self.phase('unstack')
        self.assertEqual('stop_process mlaccel-agent',
                         self.read(self.calls).splitlines()[-1])
        # The pool manager runs only where enabled.
        self.assertNotIn('mlaccel-pool-manager', self.read(self.calls))
        self.assertFalse(os.path.exists(self.pool_conf))
        self.phase('clean')
        self.assertFalse(os.path.exists(self.agent_conf))
        self.assertFalse(os.path.exists(self.statebus))
        self.assertFalse(os.path.exists(os.path.join(self.conf_dir,
                                                     'guest')))
        self.assertFalse(os.path.exists(os.path.dirname(self.host_key)))

    @property
    def agent_conf(self):
        return os.path.join(self.conf_dir, 'agent.conf')

    def assert_agent_runs(self):
        """run_process with a configuration the agent itself accepts."""
        from mlaccel.agent import novaconf
        from mlaccel.agent import service

        self.assertIn('run_process mlaccel-agent %s --config-file %s'
                      % (os.path.join(os.path.dirname(sys.executable),
                                      'mlaccel-agent'), self.agent_conf),
                      self.read(self.calls).splitlines())
        ini = inifile.IniFile(self.agent_conf)
        self.assertEqual(['file://' + self.statebus],
                         ini.get('mlaccel_statebus', 'backend_url'))
        self.assertEqual([self.host_key],
                         ini.get('mlaccel_statebus', 'host_key_file'))
        self.assertEqual(['devstack-admin'],
                         ini.get('mlaccel_agent', 'cloud'))
        # The agent reads its options and nova-compute's files from it.
        conf = service.parse_args(['--config-file', self.agent_conf])
        settings = novaconf.load(conf.mlaccel_agent.nova_config_files)
        self.assertEqual('aio1', settings.host)

    @property
    def pool_conf(self):
        return os.path.join(self.conf_dir, 'pool.conf')

    def test_pool_manager(self):
        """Enabled as a service: configured, run, stopped, cleaned."""
        services = 'n-api,n-sch,n-cpu,mlaccel-pool-manager'
        state_dir = os.path.join(self.tmp, 'data', 'mlaccel', 'pools')
        self.phase('stack', 'post-config', services=services)
        self.phase('stack', 'extra', services=services,
                   HOST_IP='192.0.2.10', MLACCEL_POOL_LEADER_LEASE='7')
        self.assertIn('run_process mlaccel-pool-manager %s --config-file '
                      '%s --cloud devstack'
                      % (os.path.join(os.path.dirname(sys.executable),
                                      'mlaccel-pool-manager'),
                         self.pool_conf),
                      self.read(self.calls).splitlines())
        # Private: it names Nova's transport, its directory the tokens.
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.pool_conf)
                                             .st_mode))
        self.assertEqual(0o700, stat.S_IMODE(os.stat(state_dir).st_mode))
        # What the manager itself reads from it.
        proc = subprocess.run(
            [sys.executable, '-c', 'import json, sys\n'
             'from mlaccel.pool import cli\n'
             'conf = cli.configure(sys.argv[1:])\n'
             'store = cli.open_store(conf)\n'
             'print(json.dumps([store.directory, store.keys(),\n'
             '    conf.mlaccel_statebus.backend_url,\n'
             '    conf.mlaccel_pool.leader_lease,\n'
             '    conf.mlaccel_launcher.callback_host,\n'
             '    conf.mlaccel_launcher.notification_url]))',
             self.pool_conf], capture_output=True, text=True)
        self.assertEqual(0, proc.returncode, proc.stderr[-1500:])
        nova = inifile.IniFile(self.nova_conf)
        transport = (nova.get('oslo_messaging_notifications',
                              'transport_url') or
                     nova.get('DEFAULT', 'transport_url'))[-1]
        self.assertEqual(
            [state_dir, [], 'file://' + self.statebus, 7, '192.0.2.10',
             transport], json.loads(proc.stdout.splitlines()[-1]))

        self.phase('unstack', services=services)
        self.assertEqual('stop_process mlaccel-pool-manager',
                         self.read(self.calls).splitlines()[-1])
        self.phase('clean', services=services)
        self.assertFalse(os.path.exists(self.pool_conf))
        self.assertFalse(os.path.exists(state_dir))

    def test_pool_manager_by_flag_needs_an_address_for_members(self):
        proc = self.phase('stack', 'extra', services='n-api',
                          MLACCEL_POOL_MANAGER='True', HOST_IP='',
                          status=1)
        self.assertIn('die: set MLACCEL_POOL_CALLBACK_HOST', proc.stderr)
        self.assertNotIn('mlaccel-pool-manager', self.read(self.calls))
        self.phase('stack', 'extra', services='n-api',
                   MLACCEL_POOL_MANAGER='True',
                   MLACCEL_POOL_CALLBACK_HOST='pools.example.org')
        self.assertIn('run_process mlaccel-pool-manager',
                      self.read(self.calls))
        self.assertEqual(['pools.example.org'], inifile.IniFile(
            self.pool_conf).get('mlaccel_launcher', 'callback_host'))

    def test_no_agent_without_nova_compute(self):
        self.phase('stack', 'post-config', services='n-api,n-sch')
        self.phase('stack', 'extra', services='n-api,n-sch')
        self.phase('unstack', services='n-api,n-sch')
        self.assertNotIn('_process', self.read(self.calls))
        self.assertFalse(os.path.exists(self.agent_conf))

    def test_compute_only_node(self):
        """Without the deployment key: only a copied host key is used."""
        before = self.read(self.nova_conf)
        proc = self.phase('stack', 'post-config', services='n-cpu',
                          status=1)
        self.assertIn('die: no host key %s' % self.host_key, proc.stderr)
        self.assertEqual(before, self.read(self.nova_conf))
        with open(self.host_key, 'w') as f:
            os.fchmod(f.fileno(), 0o600)
            f.write('ab' * 32 + '\n')
        self.phase('stack', 'post-config', services='n-cpu')
        nova = inifile.IniFile(self.nova_conf)
        self.assertEqual([self.host_key],
                         nova.get('mlaccel_statebus', 'host_key_file'))
        self.assertIsNone(nova.get('mlaccel_statebus', 'deployment_key_file'))
        self.assertFalse(os.path.exists(self.deployment_key))

    def assert_keys(self):
        """A deployment key, and the compute's key derived from it."""
        host = (inifile.IniFile(self.nova_conf).get('DEFAULT', 'host') or
                [socket.gethostname()])[-1]
        for path in (self.deployment_key, self.host_key):
            self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual(0o700, stat.S_IMODE(os.stat(
            os.path.dirname(self.host_key)).st_mode))
        self.assertIn(
            keys.derive_all(keys.read_deployment_keys(self.deployment_key),
                            [host])[0],
            keys.read_host_keys(self.host_key))

    def assert_nova_sends_versioned_notifications(self):
        """As Nova reads the edited file; unversioned ones kept."""
        from nova.conf import notifications
        from oslo_messaging.notify import notifier

        conf = cfg.ConfigOpts()
        conf.register_opts(notifications.ALL_OPTS, group='notifications')
        conf.register_opts(notifier._notifier_opts,
                           group='oslo_messaging_notifications')
        conf(['--config-file', self.nova_conf], project='nova')
        self.assertEqual('both', conf.notifications.notification_format)
        self.assertEqual(['messagingv2'],
                         conf.oslo_messaging_notifications.driver)

    def assert_nova_loads_plugins(self):
        """Nova's own loaders find mlaccel's classes from the edited file."""
        from nova.conf import scheduler as nova_scheduler
        from nova.scheduler import filters
        from nova.scheduler import weights

        conf = cfg.ConfigOpts()
        conf.register_opts(nova_scheduler.filter_scheduler_opts,
                           group='filter_scheduler')
        conf(['--config-file', self.nova_conf], project='nova')
        opts = conf.filter_scheduler
        filter_names = {cls.__name__ for cls in filters.HostFilterHandler()
                        .get_matching_classes(opts.available_filters)}
        self.assertIn('BuildSlotFilter', filter_names)
        self.assertIn('ComputeFilter', filter_names)
        self.assertEqual(set(), set(opts.enabled_filters) - filter_names)
        weigher_names = {cls.__name__ for cls in weights.HostWeightHandler()
                         .get_matching_classes(opts.weight_classes)}
        self.assertIn('LifecycleWeigher', weigher_names)
        self.assertIn('RAMWeigher', weigher_names)

    def cinder_loads(self):
        """Cinder's own loaders on the edited file, in a process of theirs.

        Cinder's options and Nova's cannot share one process. Returns the
        driver class cinder-volume would load for the ``file`` backend, the
        one it wraps, and of the weighers cinder-scheduler is told to use,
        those it finds, and all.
        """
        code = (
            'import json, sys\n'
            'from oslo_config import cfg\n'
            'from cinder.common import config  # noqa\n'
            'from cinder import objects\n'
            'objects.register_all()\n'
            'from cinder.volume import configuration\n'
            'from cinder.volume import manager\n'
            'from cinder.scheduler import host_manager  # noqa\n'
            'from cinder.scheduler import weights\n'
            'from mlaccel.cinder import driver\n'
            'cfg.CONF(["--config-file", sys.argv[1]], project="cinder")\n'
            'conf = configuration.Configuration(\n'
            '    manager.volume_backend_opts, config_group="file")\n'
            'names = cfg.CONF.scheduler_default_weighers\n'
            'found = {c.__name__ for c in weights.OrderedHostWeightHandler(\n'
            '    "cinder.scheduler.weights").get_all_classes()}\n'
            'print(json.dumps([conf.volume_driver,\n'
            '    driver.backend_class(conf).__name__,\n'
            '    [n for n in names if n in found], names]))\n')
        proc = subprocess.run([sys.executable, '-c', code, self.cinder_conf],
                              capture_output=True, text=True)
        self.assertEqual(0, proc.returncode, proc.stderr[-1500:])
        return json.loads(proc.stdout.splitlines()[-1])

    def test_cinder_mirror_backends(self):
        self.phase('stack', 'post-config')
        volume_driver, wrapped, found, weighers = self.cinder_loads()
        self.assertEqual(cinder_config.MIRROR, volume_driver)
        self.assertEqual('FileVolumeDriver', wrapped)
        self.assertEqual(['CapacityWeigher', 'GoldenImageWeigher'], weighers)
        self.assertEqual(weighers, found)
        before = self.read(self.cinder_conf)
        self.phase('stack', 'post-config')
        self.assertEqual(before, self.read(self.cinder_conf))

        self.phase('stack', 'test-config')
        self.assertEqual(
            [self.lay.transport_url],
            inifile.IniFile(self.tempest_conf).get(
                'mlaccel', 'cinder_notification_url'))

    def test_cinder_mirror_off(self):
        before = inifile.IniFile(self.cinder_conf).get('file',
                                                       'volume_driver')
        self.phase('stack', 'post-config', MLACCEL_CINDER_MIRROR='False')
        self.phase('stack', 'test-config', MLACCEL_CINDER_MIRROR='False')
        cinder = inifile.IniFile(self.cinder_conf)
        self.assertEqual(before, cinder.get('file', 'volume_driver'))
        self.assertIsNone(cinder.get('DEFAULT',
                                     'scheduler_default_weighers'))
        self.assertIsNone(inifile.IniFile(self.tempest_conf).get(
            'mlaccel', 'cinder_notification_url'))

    def test_cinder_mirror_of_a_section_without_a_driver(self):
        before = [self.read(p) for p in (self.nova_conf, self.cinder_conf)]
        proc = self.phase('stack', 'post-config', status=2,
                          MLACCEL_CINDER_MIRROR_BACKENDS='file,lvm-1')
        self.assertIn('[lvm-1] has no volume_driver', proc.stderr)
        self.assertEqual(before, [self.read(p) for p in (
            self.nova_conf, self.cinder_conf)])


class ShellcheckTest(testtools.TestCase):

    def test_plugin_is_shellcheck_clean(self):
        if shutil.which('shellcheck') is None:
            self.skipTest('shellcheck is not installed (bindep: shellcheck)')
        proc = subprocess.run(
            ['shellcheck', '-x', 'plugin.sh', 'settings',
             os.path.relpath(SHIM, PLUGIN)],
            cwd=PLUGIN, capture_output=True, text=True)
        self.assertEqual(0, proc.returncode, proc.stdout)
