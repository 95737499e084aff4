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

"""Fixtures shared by the unit and functional tests.

- :class:`Conf`: an isolated ``ConfigOpts`` with every mlaccel option.
- :class:`GlobalConf`: overrides on ``mlaccel.conf.CONF`` (what the Nova
  plugins read), undone at cleanup.
- :class:`RedisServer`: a real ``redis-server`` on a free loopback port.
- :class:`EtcdCluster`: a real three-member etcd cluster on loopback.
- :class:`StateBus`: a file or Redis state bus with ``[mlaccel_statebus]``
  pointed at it and a deployment key for its readers, and publishers
  signing with their hosts' keys and report caches stopped at cleanup.
- :class:`ProcessReportCache`: a fresh process-wide report cache (the one
  the scheduler plugins use), stopped and forgotten at cleanup.
"""

import os

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.scheduler import hostview
from mlaccel.statebus import keys as statebus_keys
from mlaccel.statebus import publisher as statebus_publisher
from mlaccel.statebus import reader as statebus_reader
from mlaccel_lab.testing import servers

STATEBUS = 'mlaccel_statebus'


class Conf(fixtures.Fixture):
    """An isolated ``ConfigOpts`` with every mlaccel option registered.

    :ivar conf: the ``ConfigOpts``; pass it to code taking ``conf``.
    """

    def _setUp(self):
        self.conf = cfg.ConfigOpts()
        mlaccel_conf.register_opts(self.conf)
        self.conf([], project='mlaccel', default_config_files=[],
                  default_config_dirs=[])
        self.addCleanup(self.conf.reset)

    def set(self, group, **overrides):
        """Override options of ``group`` (a group name) for this test."""
        for name, value in overrides.items():
            self.conf.set_override(name, value, group)


class GlobalConf(fixtures.Fixture):
    """Overrides on the process-global ``mlaccel.conf.CONF``, undone later.

    :ivar conf: ``mlaccel.conf.CONF``.
    """

    def _setUp(self):
        self._fixture = self.useFixture(
            config_fixture.Config(mlaccel_conf.CONF))
        self.conf = mlaccel_conf.CONF

    def set(self, group, **overrides):
        self._fixture.config(group=group, **overrides)


# The real servers live in the lab, which the benchmarks share; the tests
# name them here as they always did.
free_port = servers.free_port
_die_with_parent = servers._die_with_parent
RedisServerMissing = servers.RedisServerMissing
RedisServer = servers.RedisServer
EtcdMissing = servers.EtcdMissing
EtcdCluster = servers.EtcdCluster
_b64 = servers.b64


class StateBus(fixtures.Fixture):
    """A state bus with ``[mlaccel_statebus] backend_url`` pointing at it.

    :param conf: the ``ConfigOpts`` to configure, e.g. ``Conf().conf`` or
        ``mlaccel.conf.CONF`` (then overridden through a ``GlobalConf``).
    :param backend: ``'file'`` (a temporary directory), ``'redis'`` (a
        real :class:`RedisServer`) or ``'etcd'`` (a real three-member
        :class:`EtcdCluster`, reached through its first member).
    :param signed: give readers a deployment key and publishers their
        hosts' keys, as a deployment has them; else allow unsigned reports.

    :ivar url: the backend URL.
    :ivar deployment_keys: the readers'
        :class:`~mlaccel.statebus.keys.DeploymentKey` list (``signed``).
    :ivar server: the :class:`RedisServer`, for ``'redis'``; the
        :class:`EtcdCluster`, for ``'etcd'``.
    :ivar path: the bus directory, for ``'file'``.
    """

    def __init__(self, conf, backend='file', signed=True):
        super().__init__()
        self.signed = signed
        self.deployment_keys = []
        if backend not in ('file', 'redis', 'etcd'):
            raise ValueError('backend must be "file", "redis" or "etcd", '
                             'not %r' % backend)
        self.conf = conf
        self.backend = backend
        self.server = None
        self.path = None

    def _setUp(self):
        # The synchronous tooz executor spares the 1 s a threaded client
        # needs to stop; the bus behaves the same otherwise.
        if self.backend == 'redis':
            self.server = self.useFixture(RedisServer())
            self.url = self.server.url + '?executor=synchronous'
        elif self.backend == 'etcd':
            self.server = self.useFixture(EtcdCluster())
            self.url = self.server.url() + '&executor=synchronous'
        else:
            self.path = self.useFixture(fixtures.TempDir()).path
            self.url = 'file://%s?executor=synchronous' % self.path
        self.keys_dir = self.useFixture(fixtures.TempDir()).path
        options = {'backend_url': self.url, 'publisher_state_dir':
                   os.path.join(self.keys_dir, 'publisher')}
        if self.signed:
            path = os.path.join(self.keys_dir, 'deployment.key')
            statebus_keys.write_key(path, statebus_keys.generate())
            self.deployment_keys = statebus_keys.read_deployment_keys(path)
            options['deployment_key_file'] = path
        else:
            options['allow_unsigned_reports'] = True
        if self.conf is mlaccel_conf.CONF:
            self.useFixture(GlobalConf()).set(STATEBUS, **options)
        else:
            for name, value in options.items():
                self.conf.set_override(name, value, STATEBUS)
                self.addCleanup(self.conf.clear_override, name, STATEBUS)

    def host_keys(self, *hosts):
        """The :class:`~mlaccel.statebus.keys.HostKey` list of ``hosts``."""
        return statebus_keys.derive_all(self.deployment_keys, hosts)

    def host_key_file(self, *hosts):
        """A host key file holding the keys of ``hosts``; its path."""
        path = os.path.join(self.keys_dir, 'host-%s.key' % '-'.join(hosts))
        if not os.path.exists(path):
            statebus_keys.write_key(path, statebus_keys.format_host_keys(
                self.host_keys(*hosts)))
        return path

    def publisher(self, host):
        """A started :class:`~mlaccel.statebus.publisher.Publisher`."""
        pub = statebus_publisher.Publisher(host, self.conf,
                                           host_keys=self.host_keys(host))
        self.addCleanup(pub.stop)
        pub.start()
        return pub

    def cache(self):
        """A :class:`~mlaccel.statebus.reader.ReportCache`, not started.

        Call its ``refresh()`` to read the bus synchronously.
        """
        cache = statebus_reader.ReportCache(self.conf)
        self.addCleanup(cache.stop)
        return cache


class ProcessReportCache(fixtures.Fixture):
    """Give the process a fresh report cache, as the plugins get it.

    ``mlaccel.statebus.reader.process_cache()`` keeps one cache per class
    and process; this replaces the scheduler's (or ``cls``'s) for the test
    and stops it afterwards, so tests do not see each other's reports.

    :ivar cache: the process-wide cache during the test.
    """

    def __init__(self, conf=None, cls=None):
        super().__init__()
        self.conf = conf or mlaccel_conf.CONF
        self.cls = cls or hostview.HostReportCache

    def _setUp(self):
        self.cache = self.cls(self.conf)
        self.addCleanup(self.cache.stop)
        caches = dict(statebus_reader._caches)
        caches[self.cls] = (os.getpid(), self.cache)
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.statebus.reader._caches', caches))


class OnePool(fixtures.Fixture):
    """A pool store holding one pool with one idle member, and its config.

    :ivar dir: the store's directory.
    :ivar conf: a config file naming the store and a file state bus.
    """

    #: The pool's :class:`~mlaccel.pool.spec.PoolSpec`.
    SPEC = pool_spec.PoolSpec('proj', 'img', 'flv', preload=['json'])
    #: The member's token, which no command may show.
    TOKEN = 'member-token-0123456789'

    def _setUp(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.dir = os.path.join(tmp, 'pools')
        self.conf = os.path.join(tmp, 'mlaccel.conf')
        with open(self.conf, 'w') as stream:
            stream.write('[mlaccel_pool]\nstate_dir = %s\n'
                         '[mlaccel_statebus]\nbackend_url = file://%s\n'
                         % (self.dir, os.path.join(tmp, 'bus')))
        state = pool_store.new_state(self.SPEC, 1, 3, 4)
        state['members']['s1'] = {
            'server_id': 's1', 'name': 'n1', 'state': pool_store.IDLE,
            'tasks': 2, 'idle_since': 1.0, 'ready_at': 1.0, 'holder': None,
            'token': self.TOKEN}
        state['stats'].update(idle_vm_s=30.0, tasks_served=3)
        with pool_store.PoolStore(self.dir).transaction(self.SPEC.key,
                                                        create=state):
            pass
