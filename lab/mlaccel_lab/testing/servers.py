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

"""Real servers on loopback, for the tests and the benchmarks.

- :class:`RedisServer`: a real ``redis-server`` on a free loopback port.
- :class:`EtcdCluster`: a real three-member etcd cluster on loopback.

Both are ``fixtures.Fixture`` objects (``with RedisServer() as redis:``
outside a test); their processes die with the process that started them.
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
import redis
import requests


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _die_with_parent():
    """In a child before exec: get SIGKILL when its parent dies."""
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
                self._post(member, 'kv/range', {'key': b64(b'health')})
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
        self._post(member, 'kv/deleterange', {'key': b64(b'\0'),
                                              'range_end': b64(b'\0')})

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


def b64(data):
    """``data`` (bytes) in base64, as etcd's JSON gateway takes keys."""
    return base64.b64encode(data).decode('ascii')
