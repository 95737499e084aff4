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

import base64
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import redis
import requests

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.scheduler import hostview
from mlaccel.statebus import keys as statebus_keys
from mlaccel.statebus import publisher as statebus_publisher
from mlaccel.statebus import reader as statebus_reader

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


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _die_with_parent():
    """In a child before exec: get SIGKILL when the test process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class RedisServerMissing(Exception):
    pass


class RedisServer(fixtures.Fixture):
    """A real ``redis-server`` on loopback, without persistence.

    It listens on a free port of 127.0.0.1 and is killed at cleanup.
    :meth:`kill` stops it abruptly (an unreachable bus) and :meth:`start`
    brings it back on the same port, empty.

    :ivar port: its TCP port.
    :ivar url: its tooz backend URL.
    """

    START_TIMEOUT = 10.0

    def __init__(self):
        super().__init__()
        self.binary = shutil.which('redis-server') or shutil.which(
            'redis-server', path='/usr/sbin:/usr/local/sbin:/sbin')
        self.process = None
        self.port = None

    @property
    def url(self):
        return 'redis://127.0.0.1:%d' % self.port

    def check_installed(self):
        """Raise :class:`RedisServerMissing` if there is no redis-server."""
        if self.binary is None:
            raise RedisServerMissing(
                'redis-server is not installed, but the state bus tests run '
                'a real one: install the system packages listed in '
                'bindep.txt (on Debian/Ubuntu: apt-get install '
                'redis-server).')

    def _setUp(self):
        self.check_installed()
        self.workdir = self.useFixture(fixtures.TempDir()).path
        self.addCleanup(self.kill)
        for attempt in range(3):
            self.port = free_port()
            if self.start():
                return
        raise RuntimeError('redis-server did not start: %s' % self._log())

    def start(self):
        """Start the server on ``self.port``; return whether it answers."""
        log = open(os.path.join(self.workdir, 'redis.log'), 'ab')
        with log:
            self.process = subprocess.Popen(
                [self.binary, '--port', str(self.port),
                 '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                 '--dir', self.workdir, '--daemonize', 'no',
                 '--loglevel', 'warning'],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=_die_with_parent)
        client = redis.Redis(host='127.0.0.1', port=self.port,
                             socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + self.START_TIMEOUT
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False  # e.g. the port was taken meanwhile
                try:
                    if client.ping():
                        return True
                except redis.RedisError:
                    time.sleep(0.02)
        finally:
            client.close()
        self.kill()
        raise RuntimeError('redis-server did not answer PING within %.0f s: '
                           '%s' % (self.START_TIMEOUT, self._log()))

    def kill(self):
        """SIGKILL the server and reap it (no-op if it is not running)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
        if process is not None:
            process.wait()

    def _log(self):
        try:
            with open(os.path.join(self.workdir, 'redis.log'), 'rb') as f:
                return f.read()[-2000:].decode(errors='replace')
        except OSError as exc:
            return '(no log: %s)' % exc


class EtcdMissing(Exception):
    pass


class EtcdCluster(fixtures.Fixture):
    """A real etcd cluster of ``size`` members on loopback.

    Its data directories are temporary.
    Every member listens for clients and peers on free ports of 127.0.0.1.
    :meth:`kill` stops a member abruptly and :meth:`start` brings it back
    with its data, as a restarted controller; :meth:`leader` names the
    member the others follow. All are killed at cleanup.

    :ivar client_ports: each member's client port, by index.
    """

    START_TIMEOUT = 30.0

    def __init__(self, size=3):
        super().__init__()
        self.size = size
        self.binary = shutil.which('etcd') or shutil.which(
            'etcd', path='/usr/sbin:/usr/local/sbin:/sbin')
        self.processes = [None] * size

    def check_installed(self):
        if self.binary is None:
            raise EtcdMissing(
                'etcd is not installed, but the state bus tests run a real '
                'cluster: install the system packages listed in bindep.txt '
                '(on Debian/Ubuntu: apt-get install etcd-server).')

    def url(self, member=0):
        """The tooz backend URL of ``member`` (etcd's v3 JSON gateway)."""
        return 'etcd3+http://127.0.0.1:%d?api_version=v3' % (
            self.client_ports[member])

    def _name(self, member):
        return 'm%d' % member

    #: Tries with new ports, for a port taken between its pick and use.
    ATTEMPTS = 3

    def _setUp(self):
        self.check_installed()
        self.addCleanup(self.kill_all)
        for attempt in range(self.ATTEMPTS):
            self.workdir = self.useFixture(fixtures.TempDir()).path
            ports = set()
            while len(ports) < 2 * self.size:
                ports.add(free_port())
            ports = sorted(ports)
            self.client_ports = ports[:self.size]
            self.peer_ports = ports[self.size:]
            self.initial = ','.join(
                '%s=http://127.0.0.1:%d' % (self._name(m),
                                            self.peer_ports[m])
                for m in range(self.size))
            for member in range(self.size):
                self.start(member, wait=False)
            try:
                for member in range(self.size):
                    self.wait_healthy(member)
                return
            except RuntimeError:
                self.kill_all()
                if attempt == self.ATTEMPTS - 1:
                    raise

    def start(self, member, wait=True):
        """Start ``member`` (again, with its data if it ran before)."""
        name = self._name(member)
        data = os.path.join(self.workdir, name)
        client = 'http://127.0.0.1:%d' % self.client_ports[member]
        peer = 'http://127.0.0.1:%d' % self.peer_ports[member]
        log = open(os.path.join(self.workdir, name + '.log'), 'ab')
        with log:
            self.processes[member] = subprocess.Popen(
                [self.binary, '--name', name, '--data-dir', data,
                 '--listen-client-urls', client,
                 '--advertise-client-urls', client,
                 '--listen-peer-urls', peer,
                 '--initial-advertise-peer-urls', peer,
                 '--initial-cluster', self.initial,
                 '--initial-cluster-state', 'new',
                 '--initial-cluster-token', 'mlaccel-tests',
                 '--log-level', 'warn'],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=_die_with_parent)
        if wait:
            self.wait_healthy(member)

    def _post(self, member, path, body=None, timeout=1.0):
        reply = requests.post('http://127.0.0.1:%d/v3/%s' % (
            self.client_ports[member], path), json=body or {},
            timeout=timeout)
        reply.raise_for_status()
        return reply.json()

    def wait_healthy(self, member):
        """Wait until ``member`` serves a linearizable read."""
        deadline = time.monotonic() + self.START_TIMEOUT
        while time.monotonic() < deadline:
            process = self.processes[member]
            if process is None or process.poll() is not None:
                break
            try:
                self._post(member, 'kv/range', {'key': _b64(b'health')})
                return
            except (requests.RequestException, ValueError):
                time.sleep(0.1)
        raise RuntimeError('etcd member %d did not serve within %.0f s: %s'
                           % (member, self.START_TIMEOUT, self._log(member)))

    def leader(self):
        """The index of the member that leads, asked of a live member."""
        for member, process in enumerate(self.processes):
            if process is None or process.poll() is not None:
                continue
            status = self._post(member, 'maintenance/status')
            ids = self._post(member, 'cluster/member/list')['members']
            names = {m['ID']: m['name'] for m in ids}
            return int(names[status['leader']][1:])
        raise RuntimeError('no etcd member is running')

    def wipe(self):
        """Delete every key, as a cluster restored empty would hold."""
        member = next(m for m, p in enumerate(self.processes)
                      if p is not None and p.poll() is None)
        self._post(member, 'kv/deleterange', {'key': _b64(b'\0'),
                                              'range_end': _b64(b'\0')})

    def kill(self, member):
        """SIGKILL ``member`` and reap it (no-op if it is not running)."""
        process, self.processes[member] = self.processes[member], None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
        if process is not None:
            process.wait()

    def kill_all(self):
        for member in range(self.size):
            self.kill(member)

    def _log(self, member):
        try:
            with open(os.path.join(self.workdir, self._name(member)
                                   + '.log'), 'rb') as f:
                return f.read()[-2000:].decode(errors='replace')
        except OSError as exc:
            return '(no log: %s)' % exc


def _b64(data):
    return base64.b64encode(data).decode('ascii')


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
