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

"""The daemon's listeners and connections: a thread per connection.

The Unix socket is made with mode 0600 and serves only peers of the
daemon's own uid or root (SO_PEERCRED), checked before the peer holds a
connection slot. The optional TCP listener (TLS when configured) serves
only requests that carry the token: a TCP peer first has ``auth_timeout``
seconds to finish the handshake and send a request with the right token,
holding only a place in a separate, equally bounded set of pending
connections (the oldest is dropped for a newcomer); it learns nothing
about the protocol until then and takes a connection slot only after. A
connection idle for ``idle_timeout`` is closed. Each line read is one
request; every request, good or bad, gets exactly one reply line, and only
a refused peer loses its connection. A ``rekey`` request from the token's
holder replaces the token (a warm pool hands a daemon to a new holder).
"""

import collections
import hmac
import json
import os
import socket
import stat
import struct
import threading
import time

from oslo_log import log as logging

from mlaccel.taskd import protocol

LOG = logging.getLogger(__name__)

_CRED = struct.Struct('3i')


class StartupError(Exception):
    """The daemon cannot listen where it is configured to."""


def bind_unix(path):
    """A listening Unix socket at ``path`` with mode 0600.

    A stale socket file is replaced; a socket someone still listens on, or
    a file that is not a socket, makes this raise :class:`StartupError`.
    """
    os.makedirs(os.path.dirname(path) or '.', mode=0o755, exist_ok=True)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None:
        if not stat.S_ISSOCK(mode):
            raise StartupError('%s exists and is not a socket' % path)
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(path)
            except OSError:
                os.unlink(path)
            else:
                raise StartupError('another daemon listens on %s' % path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def peer_uid(conn):
    _pid, uid, _gid = _CRED.unpack(conn.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return uid


class _Reader:
    """``read(n)`` on a connection that fails once ``deadline`` passed."""

    def __init__(self, conn, deadline):
        self.conn = conn
        self.deadline = deadline

    def __call__(self, size):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError('connection idle or too slow')
        self.conn.settimeout(left)
        return self.conn.recv(size)


class Server:
    """Listens, reads requests and hands them to ``handler(request)``.

    ``handler`` returns the reply fields or raises
    :class:`protocol.ProtocolError`. ``tls_context`` (an
    ``ssl.SSLContext``) makes the TCP listener serve TLS. ``on_rekey`` is
    called after each ``rekey``: the daemon has a new holder.
    """

    def __init__(self, group, handler, token=None, tls_context=None,
                 on_rekey=None):
        self.conf = group
        self.handler = handler
        self.on_rekey = on_rekey
        self._token = token.encode() if token else None
        self._tls = tls_context
        self._listeners = []
        self._lock = threading.Lock()
        self._connections = 0
        # fd -> None of the TCP connections still authenticating, oldest
        # first.
        self._pending = collections.OrderedDict()
        self.addresses = []
        self._socket_path = None
        self._allowed_uids = {os.geteuid(), 0}

    def bind(self):
        """Open the configured listeners; return their client addresses."""
        path = self.conf.socket_path
        self._listeners.append((bind_unix(path), 'unix'))
        self._socket_path = path
        self.addresses.append('unix:%s' % path)
        if self.conf.tcp_address:
            if not self._token:
                raise StartupError('a TCP address needs a token: set '
                                   'token_file')
            try:
                host, port = protocol.parse_tcp_address(
                    self.conf.tcp_address)
            except ValueError as exc:
                raise StartupError(str(exc))
            family = socket.AF_INET6 if ':' in host else socket.AF_INET
            sock = socket.create_server((host, port), family=family,
                                        backlog=128)
            host, port = sock.getsockname()[:2]
            self._listeners.append((sock, 'tcp'))
            self.addresses.append(protocol.format_tcp_address(host, port))
        return list(self.addresses)

    def start(self):
        for sock, transport in self._listeners:
            threading.Thread(target=self._accept, args=(sock, transport),
                             daemon=True,
                             name='accept-%s' % transport).start()

    def close(self):
        """Stop listening and remove the socket file."""
        for sock, _ in self._listeners:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        if self._socket_path:
            try:
                os.unlink(self._socket_path)
            except FileNotFoundError:
                pass
            self._socket_path = None

    def _accept(self, listener, transport):
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                if listener.fileno() < 0:
                    return
                continue
            try:
                if transport == 'unix':
                    self._accept_unix(conn)
                else:
                    self._accept_tcp(conn)
            except Exception:
                LOG.exception('Could not take a %s connection', transport)
                conn.close()

    def _take(self):
        """Take a connection slot; False if there is none."""
        with self._lock:
            if self._connections >= self.conf.max_connections:
                return False
            self._connections += 1
            return True

    def _give_back(self):
        with self._lock:
            self._connections -= 1

    def _start_thread(self, target, conn, undo):
        try:
            threading.Thread(target=target, args=(conn,), daemon=True,
                             name='conn').start()
        except RuntimeError:
            undo()
            raise

    def _accept_unix(self, conn):
        uid = peer_uid(conn)
        if uid not in self._allowed_uids:
            LOG.warning('Refused a Unix peer of uid %d', uid)
            self._refuse(conn, protocol.FORBIDDEN,
                         'uid %d may not use this daemon' % uid)
        elif not self._take():
            self._refuse(conn, protocol.BUSY, 'too many connections')
        else:
            self._start_thread(self._serve_unix, conn, self._give_back)

    def _accept_tcp(self, conn):
        """Serve ``conn`` once it authenticated; drop the oldest waiting.

        When max_connections peers are still authenticating, the oldest
        is cut off: a flood of peers without the token must outpace a
        real client's handshake to keep it out.
        """
        # Replies are small writes after TLS's own (session tickets): sent
        # at once, not held back until the client's delayed ACK.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fd = conn.fileno()
        with self._lock:
            if len(self._pending) >= self.conf.max_connections:
                oldest, _ = self._pending.popitem(last=False)
                _shutdown(oldest)
                LOG.debug('Dropped the oldest unauthenticated connection')
            self._pending[fd] = None
        self._start_thread(self._serve_tcp, conn,
                           lambda: self._authenticated(fd))

    def _authenticated(self, fd):
        """Leave the pending connections (if still there)."""
        with self._lock:
            self._pending.pop(fd, None)

    def _refuse(self, conn, code, message):
        try:
            conn.settimeout(1.0)
            conn.sendall(protocol.encode(protocol.error(None, code, message)))
        except OSError:
            pass
        conn.close()

    def _serve_unix(self, conn):
        try:
            reader = _Reader(conn, time.monotonic() + self.conf.idle_timeout)
            self._serve(conn, reader, protocol.iter_lines(
                reader, self.conf.max_request_bytes), 'unix')
        except OSError as exc:
            LOG.debug('Connection ended: %s', exc)
        finally:
            # The slot first: a peer that sees the close finds it free.
            self._give_back()
            conn.close()

    def _serve_tcp(self, conn):
        """Authenticate within auth_timeout, then serve with a slot."""
        fd, slot = conn.fileno(), False
        try:
            reader = _Reader(conn, time.monotonic() + self.conf.auth_timeout)
            if self._tls is not None:
                # The timeout bounds the whole handshake, not each read.
                conn.settimeout(self.conf.auth_timeout)
                conn = self._tls.wrap_socket(conn, server_side=True,
                                             do_handshake_on_connect=False)
                reader.conn = conn
                conn.do_handshake()
            lines = protocol.iter_lines(reader, self.conf.max_request_bytes)
            first = next(lines, None)
            while first is not None and first is not protocol.TOO_LONG \
                    and not first.strip():
                first = next(lines, None)
            if first is None:
                return
            if first is protocol.TOO_LONG or not self._token_ok(first):
                self._unauthorized(conn)
                return
            self._authenticated(fd)
            slot = self._take()
            if not slot:
                self._refuse(conn, protocol.BUSY, 'too many connections')
                return
            self._serve(conn, reader, lines, 'tcp', first)
        except (OSError, ValueError) as exc:
            LOG.debug('TCP connection ended: %s', exc)
        finally:
            # Out of the pending set before the fd can be reused, and the
            # slot given back before the peer can see the close.
            self._authenticated(fd)
            if slot:
                self._give_back()
            conn.close()

    def _unauthorized(self, conn):
        LOG.warning('Refused a TCP request with a missing or wrong token')
        self._refuse(conn, protocol.UNAUTHORIZED, 'missing or wrong token')

    def _serve(self, conn, reader, lines, transport, first=None):
        """Answer each request line until the peer leaves or idles."""
        if first is not None:
            lines = _prepend(first, lines)
        for line in lines:
            if line is protocol.TOO_LONG:
                reply, close = protocol.error(
                    None, protocol.TOO_LARGE, 'request longer than %d '
                    'bytes' % self.conf.max_request_bytes), False
            elif not line.strip():
                continue
            elif transport == 'tcp' and not self._token_ok(line):
                self._unauthorized(conn)
                return
            else:
                reply, close = self._handle(line), False
            conn.settimeout(self.conf.idle_timeout)
            conn.sendall(protocol.encode(reply))
            reader.deadline = time.monotonic() + self.conf.idle_timeout
            if close:
                return

    def _handle(self, line):
        """One request line -> its reply."""
        rid = None
        try:
            request = protocol.parse_request(line)
            rid = request.get('id')
            if request['op'] == 'rekey':
                return protocol.ok(rid, **self._rekey(request['new_token']))
            return protocol.ok(rid, **self.handler(request))
        except protocol.ProtocolError as exc:
            return protocol.error(exc.request_id if rid is None else rid,
                                  exc.code, exc.message)
        except Exception as exc:
            LOG.exception('Request failed')
            return protocol.error(rid, protocol.INTERNAL,
                                  '%s: %s' % (type(exc).__name__, exc))

    def _rekey(self, new_token):
        """Accept only ``new_token`` from now on (a pool claim).

        Only a client that holds the current token (or a Unix peer of the
        daemon's own uid) gets here; every later request, also on its own
        connection, must carry the new one. The token file is rewritten in
        place (it is the daemon's, mode 0600), so that a restarted daemon
        keeps serving the new holder; if that fails the new token is still
        in force and a warning says so.
        """
        if self._token is None:
            raise protocol.ProtocolError(protocol.INVALID,
                                         'this daemon has no token')
        with self._lock:
            self._token = new_token.encode()
        saved = False
        path = self.conf.token_file
        if path:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
                with os.fdopen(fd, 'w') as stream:
                    stream.write(new_token + '\n')
                    stream.flush()
                    os.fsync(stream.fileno())
                saved = True
            except OSError as exc:
                LOG.warning('New token in force but not saved to %s: %s',
                            path, exc)
        LOG.info('Token replaced by its holder%s',
                 '' if saved else ' (not saved)')
        if self.on_rekey is not None:
            self.on_rekey()
        return {'rekeyed': True, 'saved': saved}

    def _token_ok(self, line):
        """True if the request line carries the token.

        Nothing else is looked at, so that a peer without it learns
        nothing about the protocol.
        """
        try:
            token = json.loads(line).get('token')
        except (ValueError, UnicodeDecodeError, AttributeError):
            return False
        return isinstance(token, str) and hmac.compare_digest(
            token.encode(), self._token)


def _shutdown(fd):
    """Shut down the socket open at ``fd`` (the caller keeps it open)."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _prepend(first, lines):
    yield first
    yield from lines
