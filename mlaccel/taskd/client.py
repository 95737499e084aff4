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

"""Client of mlaccel-taskd over its Unix socket or TCP (with TLS)."""

import itertools
import json
import socket
import threading
import time

from mlaccel.taskd import protocol
from mlaccel import tls

#: Longest server-side wait of one request; :meth:`TaskdClient.wait`
#: chains such waits for longer timeouts.
WAIT_CHUNK = 300.0


class TaskdError(Exception):
    """The daemon answered with an error reply."""

    def __init__(self, code, message):
        super().__init__('%s: %s' % (code, message))
        self.code = code
        self.message = message


class TaskdClient:
    """Talks to one daemon over one connection; thread-safe.

    ``address`` is ``"unix:/path/to/socket"`` or ``"tcp:HOST:PORT"``;
    ``token`` is required over TCP. With ``pinned_cert_pem`` (the daemon's
    own certificate, e.g. from the VM's user-data) or ``cafile`` (the
    operator's CA) the TCP connection is TLS, and the token is sent only
    after the handshake proved the peer holds the pinned certificate's key.
    ``timeout`` bounds connecting and every reply except the server-side
    wait of :meth:`wait`.
    """

    def __init__(self, address, token=None, timeout=30.0,
                 max_reply_bytes=64 * 1024 * 1024, pinned_cert_pem=None,
                 cafile=None):
        scheme, _, target = address.partition(':')
        if scheme == 'unix' and target:
            self._family, self._target = socket.AF_UNIX, target
        elif scheme == 'tcp':
            self._target = protocol.parse_tcp_address(target)
            self._family = socket.AF_INET6 if ':' in self._target[0] \
                else socket.AF_INET
        else:
            raise ValueError('taskd address %r is not "unix:PATH" or '
                             '"tcp:HOST:PORT"' % address)
        self._tls = None
        if pinned_cert_pem or cafile:
            if self._family == socket.AF_UNIX:
                raise ValueError('TLS is for TCP addresses only')
            self._tls = tls.client_context(pinned_cert_pem=pinned_cert_pem,
                                           cafile=cafile)
        self.address = address
        self.token = token
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._sock = None
        self._lines = None

    def close(self):
        with self._lock:
            self._disconnect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _disconnect(self):
        if self._sock is not None:
            self._sock.close()
        self._sock = self._lines = None

    def call(self, op, reply_timeout=None, **fields):
        """Send one request; return the reply or raise :class:`TaskdError`.

        Raises ``OSError`` (e.g. ``ConnectionError``, ``TimeoutError``) when
        the daemon cannot be reached or does not answer in time.
        """
        with self._lock:
            rid = next(self._ids)
            message = protocol.request(op, rid, token=self.token, **fields)
            try:
                if self._sock is None:
                    sock = socket.socket(self._family, socket.SOCK_STREAM)
                    sock.settimeout(self.timeout)
                    self._sock = sock
                    sock.connect(self._target)
                    if self._tls is not None:
                        # Handshake now: nothing is sent to an impostor.
                        sock = self._tls.wrap_socket(
                            sock, server_hostname=self._target[0])
                        self._sock = sock
                    self._lines = protocol.iter_lines(sock.recv,
                                                      self.max_reply_bytes)
                self._sock.settimeout(reply_timeout or self.timeout)
                self._sock.sendall(protocol.encode(message))
                line = next(self._lines, None)
            except BaseException:
                self._disconnect()
                raise
            if line is None or line is protocol.TOO_LONG:
                self._disconnect()
                raise ConnectionError(
                    'taskd at %s closed the connection' % self.address
                    if line is None else 'taskd reply too large')
            reply = json.loads(line)
            if reply.get('id') not in (rid, None):
                self._disconnect()
                raise ConnectionError('taskd reply out of order')
        if not reply.get('ok'):
            error = reply.get('error') or {}
            raise TaskdError(error.get('code'), error.get('message'))
        return reply

    def health(self):
        return self.call('health')

    def submit(self, spec, args=None, **fields):
        """Start a task; return its id.

        ``spec`` is a :class:`~mlaccel.taskd.protocol.TaskSpec`, or its
        ``entry`` with ``args`` and the other fields of one as keywords.
        """
        if not isinstance(spec, protocol.TaskSpec):
            spec = protocol.TaskSpec(spec, args, **fields)
        elif args is not None or fields:
            raise TypeError('give a TaskSpec or its fields, not both')
        return self.call('submit', **spec.to_wire())['task']['id']

    def status(self, task_id):
        return self.call('status', task=task_id)['task']

    def wait(self, task_id, timeout=None):
        """Block until the task ends; return its status.

        The daemon holds the request until the task ends (no polling).
        Raises ``TimeoutError`` if it is still running after ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            chunk = WAIT_CHUNK if deadline is None else max(
                0.0, min(WAIT_CHUNK, deadline - time.monotonic()))
            reply = self.call('wait', reply_timeout=chunk + self.timeout,
                              task=task_id, timeout=chunk)
            if not reply['timed_out']:
                return reply['task']
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError('task %s still %s after %s s' % (
                    task_id, reply['task']['state'], timeout))

    def cancel(self, task_id):
        return self.call('cancel', task=task_id)['task']

    def logs(self, task_id, tail=None):
        return self.call('logs', task=task_id, tail=tail)['logs']

    def rekey(self, new_token):
        """Hand the daemon to a new holder: only ``new_token`` works after.

        This client goes on with the new token; returns the reply (its
        ``saved`` says whether the daemon could save the token).
        """
        reply = self.call('rekey', new_token=new_token)
        with self._lock:
            self.token = new_token
        return reply
