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

"""Start, watch and stop the cloud's processes by recorded pid.

Each service runs in its own session (so its process group holds it and
every child it forks) with its output in ``log/<name>.log`` and its pid in
``pids/<name>.pid``. Every process also carries a marker in its
environment (``MLACCEL_AIO_PROCESS_OF=<base>``): :func:`sweep` finds and
ends anything left with it, e.g. guests whose nova-compute was killed.
"""

import http.client
import os
import signal
import socket
import subprocess
import time

import psutil

from mlaccel.tempest import guests
from mlaccel_lab.testing.aio import layout as aio_layout


class ServiceError(Exception):
    """A service did not start, with the end of its log."""


def environ(layout, extra=None):
    env = dict(os.environ)
    env[aio_layout.MARKER_ENV] = layout.base
    env['PATH'] = os.path.dirname(layout.bin('python')) + os.pathsep \
        + env.get('PATH', '/usr/bin:/bin')
    env.update(extra or {})
    return env


def log_path(layout, name):
    return os.path.join(layout.log, name + '.log')


def _pid_file(layout, name):
    return os.path.join(layout.pids, name + '.pid')


def start(layout, name, argv, env=None, cwd=None):
    """Start ``argv`` as service ``name`` in a new session; return its pid."""
    if running(layout, name):
        raise ServiceError('%s is already running' % name)
    os.makedirs(layout.pids, exist_ok=True)
    os.makedirs(layout.log, exist_ok=True)
    with open(log_path(layout, name), 'ab') as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, cwd=cwd or layout.base,
            env=environ(layout, env), start_new_session=True)
    with open(_pid_file(layout, name), 'w') as f:
        f.write('%d\n' % proc.pid)
    return proc.pid


def run(layout, name, argv, env=None):
    """Run a one-shot command, its output appended to ``log/<name>.log``."""
    os.makedirs(layout.log, exist_ok=True)
    with open(log_path(layout, name), 'ab') as log:
        code = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, cwd=layout.base,
                               env=environ(layout, env))
    if code:
        raise ServiceError('%s failed with exit code %d:\n%s'
                           % (' '.join(argv[:3]), code, tail(layout, name)))


def tail(layout, name, lines=15):
    try:
        with open(log_path(layout, name), errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except FileNotFoundError:
        return '(no log)'


def recorded(layout):
    """Names of the services with a pid file."""
    try:
        return sorted(name[:-4] for name in os.listdir(layout.pids)
                      if name.endswith('.pid'))
    except FileNotFoundError:
        return []


def _read_pid(layout, name):
    try:
        with open(_pid_file(layout, name)) as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def _group_alive(pgid):
    return any(group == pgid for _pid, group, _state in guests.processes())


def pid(layout, name):
    """The recorded pid of service ``name`` (``None``: none recorded)."""
    return _read_pid(layout, name)


def running(layout, name):
    pid = _read_pid(layout, name)
    return pid is not None and _group_alive(pid)


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def stop(layout, name, timeout=10.0):
    """TERM the service's process group, KILL it after ``timeout``.

    Returns whether it had to be killed.
    """
    killed = False
    pid = _read_pid(layout, name)
    if pid is not None:
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(pid):
            killed = True
            _kill_group(pid)
    _forget(layout, name)
    return killed


def kill(layout, name):
    """SIGKILL the service's process group at once, as a crash does."""
    pid = _read_pid(layout, name)
    if pid is not None:
        _kill_group(pid)
    _forget(layout, name)


def _kill_group(pid):
    _signal_group(pid, signal.SIGKILL)
    while _group_alive(pid):
        time.sleep(0.05)


def _forget(layout, name):
    try:
        os.unlink(_pid_file(layout, name))
    except FileNotFoundError:
        pass


def marked(base):
    """Pids of live processes carrying ``base``'s marker."""
    return guests.with_environ(aio_layout.MARKER_ENV, base)


def sweep(base, timeout=5.0):
    """End every process still marked with ``base``; return their pids."""
    pids = marked(base)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while marked(base) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in marked(base):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def port_holders(ports):
    """``{port: who holds it}`` of those of ``ports`` a socket holds.

    A listening socket, or a client socket whose local port it is: either
    makes a service that binds the port fail with "Address already in
    use". A socket in TIME_WAIT holds nothing a server cannot reuse.
    """
    wanted, held = set(ports), {}
    for conn in psutil.net_connections(kind='inet'):
        if conn.laddr and conn.laddr.port in wanted and \
                conn.status != psutil.CONN_TIME_WAIT:
            held.setdefault(conn.laddr.port, _describe(conn.pid))
    return held


def _describe(pid):
    if pid is None:
        return 'a socket of no process this user can see'
    try:
        process = psutil.Process(pid)
        command = ' '.join(process.cmdline()) or process.name()
    except psutil.Error:
        return 'pid %d' % pid
    return 'pid %d (%s)' % (pid, ' '.join(command.split())[:120])


def held_message(ports):
    """A line naming the holder of each held port of ``ports``, or ``''``."""
    return '; '.join('port %d is held by %s' % item
                     for item in sorted(port_holders(ports).items()))


def port_open(port, host='127.0.0.1'):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def http_answers(port, host='127.0.0.1'):
    """Whether an HTTP server on ``port`` answers a request (any status)."""
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request('GET', '/')
        conn.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def wait_port(layout, name, port, timeout=120.0, probe=port_open):
    """Wait until ``port`` accepts connections; fail fast if ``name`` dies.

    :param probe: what counts as ready, given the port: by default that it
        accepts a connection; :func:`http_answers` for a WSGI server, which
        listens before its application is loaded (and may fail to load).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe(port):
            return
        if name and not running(layout, name):
            held = held_message([port])
            raise ServiceError('%s exited before listening on %d%s:\n%s'
                               % (name, port, ' (%s)' % held if held else '',
                                  tail(layout, name)))
        time.sleep(0.2)
    raise ServiceError('%s did not listen on %d within %.0f s:\n%s'
                       % (name, port, timeout, tail(layout, name)))
