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

"""``mlaccel-agent`` as a process: start, report, SIGTERM, bad config,
and a download killed with the agent."""

import os
import signal
import subprocess
import sys
import time

import fixtures

from mlaccel.agent import inventory
from tests import fixtures as mlaccel_fixtures
from tests.unit.agent import base

AGENT = [sys.executable, '-c',
         'import sys; from mlaccel.cmd import agent; '
         'sys.exit(agent.main())']

# Writes half an image into the cache the agent's way, then hangs.
KILLED_FETCH = '''
import sys, threading
from mlaccel.agent import cachefile, novaconf
from tests.unit.agent import base
settings = novaconf.load([sys.argv[1]])
data = b"x" * 65536
def chunks():
    yield data[:4096]
    print("writing", flush=True)
    threading.Event().wait()
cachefile.write(settings, base.image("img", data), chunks, 0)
'''


class ServiceTest(base.NodeTestCase):

    NOVA_CONF = 'transport_url = fake://\n'

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(
            self.conf.conf, 'file'))
        self.mlaccel_conf = os.path.join(self.root, 'mlaccel.conf')
        self.write_conf()

    def write_conf(self, extra=''):
        with open(self.mlaccel_conf, 'w') as f:
            f.write('[mlaccel_statebus]\nbackend_url = %s\n'
                    'host_key_file = %s\npublisher_state_dir = %s\n'
                    '[mlaccel_agent]\nnova_config_files = %s\n'
                    'hot_images = img\nscan_interval = 0.2\n%s'
                    % (self.bus.url, self.bus.host_key_file(self.HOST),
                       self.conf.conf.mlaccel_statebus.publisher_state_dir,
                       self.nova_conf, extra))

    def spawn(self, *args):
        self.log_file = os.path.join(self.root, 'agent.log')
        proc = subprocess.Popen(
            AGENT + ['--config-file', self.mlaccel_conf,
                     '--log-file', self.log_file] + list(args),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def on_bus(self):
        cache = self.bus.cache()
        cache.refresh()
        return cache.snapshot().get(self.HOST)

    def test_killed_download_cleaned_at_next_start_then_sigterm(self):
        # An agent killed in the middle of a download leaves a temporary.
        fetch = subprocess.Popen(
            [sys.executable, '-c', KILLED_FETCH, self.nova_conf],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: fetch.poll() is None and fetch.kill())
        self.assertEqual(b'writing\n', fetch.stdout.readline())
        fetch.kill()
        fetch.wait()
        left = [name for name in self.cache_files()
                if name.startswith(inventory.TEMP_PREFIX)]
        self.assertEqual(1, len(left))
        with open(os.path.join(self.settings.cache_dir,
                               inventory.cache_name('img')), 'wb') as f:
            f.write(b'a cached image')
        # The next start removes it and reports what the cache holds.
        agent = self.spawn()
        seen = base.wait_for(self.on_bus)
        self.assertIsNotNone(seen, 'no report; see %s' % self.log_file)
        self.assertEqual([inventory.cache_name('img')], self.cache_files())
        self.assertEqual(frozenset({'img'}), seen.cached_images)
        self.assertEqual(4, seen.build_limit)
        self.assertGreater(seen.cache_free_bytes, 0)
        # SIGTERM: a clean stop, and the report leaves the bus.
        agent.send_signal(signal.SIGTERM)
        self.assertEqual(0, agent.wait(60))
        self.assertIsNone(self.on_bus())

    def test_bad_config_is_one_line_and_nonzero(self):
        os.unlink(self.nova_conf)
        agent = self.spawn()
        _, err = agent.communicate(timeout=60)
        self.assertEqual(2, agent.returncode)
        lines = err.decode().strip().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('mlaccel-agent: error:', lines[0])
        self.assertIn('does not exist', lines[0])

    def test_bad_bus_url_and_key_file_are_one_line(self):
        for extra, expected in (
                ('[mlaccel_statebus]\nbackend_url = nope://x:secretpw@h\n',
                 'backend_url'),
                ('[mlaccel_statebus]\nhost_key_file = %s\n'
                 % os.path.join(self.root, 'missing.key'), 'host_key_file')):
            self.write_conf()
            with open(self.mlaccel_conf, 'a') as f:
                f.write(extra)
            agent = self.spawn()
            _, err = agent.communicate(timeout=60)
            self.assertEqual(2, agent.returncode)
            lines = err.decode().strip().splitlines()
            self.assertEqual(1, len(lines), lines)
            self.assertIn(expected, lines[0])
            self.assertNotIn('secretpw', lines[0])

    def test_unknown_fetcher_is_one_line(self):
        self.write_conf('fetcher = bogus\ncloud = somecloud\n')
        agent = self.spawn()
        _, err = agent.communicate(timeout=60)
        self.assertEqual(2, agent.returncode)
        lines = err.decode().strip().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn("fetcher 'bogus'", lines[0])


class AgentFaultsTest(base.NodeTestCase):
    """The agent in-process with Glance and the state bus unreachable.

    "Glance" is a real openstacksdk client aimed at a closed port.
    """

    NOVA_CONF = 'transport_url = fake://\n'

    def test_keeps_serving_without_glance_and_through_a_bus_outage(self):
        import openstack

        from mlaccel.agent import cloud as agent_cloud
        from mlaccel.agent import service

        conf = self.useFixture(mlaccel_fixtures.Conf())
        bus = self.useFixture(mlaccel_fixtures.StateBus(conf.conf, 'redis'))
        conf.set('mlaccel_agent', nova_config_files=[self.nova_conf],
                 hot_images=['img'], scan_interval=0.1, report_interval=1)
        conf.set('mlaccel_statebus',
                 host_key_file=bus.host_key_file(self.HOST))
        port = mlaccel_fixtures.free_port()
        # keystoneauth logs its failed discovery on the root logger.
        self.useFixture(fixtures.FakeLogger(name='keystoneauth'))

        def connect(name):
            return openstack.connect(
                auth_url='http://127.0.0.1:%d/v3' % port, username='u',
                password='p', project_name='p', user_domain_id='default',
                project_domain_id='default', load_yaml_config=False,
                load_envvars=False)
        glance = agent_cloud.Cloud(None, connect=connect)
        # A cache entry no known id names: Glance would be asked.
        os.makedirs(self.settings.cache_dir)
        with open(os.path.join(self.settings.cache_dir,
                               inventory.cache_name('unknown')), 'wb'):
            pass
        agent = service.Agent(conf.conf, cloud=glance)
        agent.start()
        self.addCleanup(agent.stop)

        def on_bus():
            cache = bus.cache()
            cache.refresh()
            return cache.snapshot().get(self.HOST)

        self.assertTrue(base.wait_for(on_bus))
        self.assertTrue(base.wait_for(
            lambda: 'Cannot read hot images from Glance'
            in self.log.output))
        self.assertTrue(base.wait_for(
            lambda: 'Cannot list images in Glance' in self.log.output))
        bus.server.kill()
        agent.builds.started('b1', time.time())
        self.assertTrue(base.wait_for(
            lambda: 'Cannot publish the host report' in self.log.output))
        bus.server.start()
        seen = base.wait_for(
            lambda: (on_bus() or None) and
            on_bus().builds_in_flight == 1, timeout=120)
        self.assertTrue(seen)
        agent.stop()
        self.assertIsNone(on_bus())


class BuildLimitCapTest(base.NodeTestCase):
    """The published limit never passes nova-compute's own bound."""

    NOVA_CONF = 'max_concurrent_builds = 2\n'

    def agent(self, **opts):
        from mlaccel.agent import service

        conf = self.useFixture(mlaccel_fixtures.Conf())
        conf.set('mlaccel_agent', nova_config_files=[self.nova_conf],
                 listen_notifications=False, **opts)
        return service.Agent(conf.conf)

    def test_capped_at_max_concurrent_builds(self):
        agent = self.agent(initial_build_limit=4, max_build_limit=32)
        self.assertEqual(2, agent.builds.limit)
        self.assertEqual(2, agent.builds.limiter.max_limit)
        self.assertIn('max_concurrent_builds = 2', self.log.output)

    def test_unbounded_nova_keeps_the_agent_limits(self):
        with open(self.nova_conf, 'a') as f:
            f.write('max_concurrent_builds = 0\n')
        agent = self.agent(initial_build_limit=4, max_build_limit=32)
        self.assertEqual(4, agent.builds.limit)
        self.assertEqual(32, agent.builds.limiter.max_limit)


class ReloadTest(base.NodeTestCase):
    """SIGHUP's reload reaches the agent's intervals and hot images."""

    def write(self, report_interval, hot_images, fetches):
        with open(self.path, 'w') as f:
            f.write('[mlaccel_statebus]\nbackend_url = file://%s\n'
                    'allow_unsigned_reports = true\n'
                    '[mlaccel_agent]\nnova_config_files = %s\n'
                    'listen_notifications = false\n'
                    'report_interval = %s\nscan_interval = %s\n'
                    'hot_images = %s\nmax_concurrent_fetches = %d\n'
                    % (os.path.join(self.root, 'bus'), self.nova_conf,
                       report_interval, report_interval / 10, hot_images,
                       fetches))

    def test_reload_applies_mutable_options_only(self):
        from oslo_config import cfg

        from mlaccel.agent import service
        from mlaccel import conf as mlaccel_conf
        from mlaccel import daemon

        self.path = os.path.join(self.root, 'mlaccel.conf')
        self.write(10.0, 'img', 2)
        conf = cfg.ConfigOpts()
        mlaccel_conf.register_opts(conf)
        conf(['--config-file', self.path], project='mlaccel',
             default_config_files=[], default_config_dirs=[])
        agent = service.Agent(conf)
        self.assertEqual((10.0, 1.0), (agent.reporter.interval,
                                       agent.reporter.tick))
        self.write(5.0, 'img,other', 7)
        daemon.reload_config(conf)
        self.assertEqual((5.0, 0.5), (agent.reporter.interval,
                                      agent.reporter.tick))
        self.assertEqual(['img', 'other'], conf.mlaccel_agent.hot_images)
        # Not mutable: the running agent keeps its fetch pool.
        self.assertEqual(2, conf.mlaccel_agent.max_concurrent_fetches)
