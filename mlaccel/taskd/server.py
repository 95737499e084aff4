"""The daemon's listeners and connections: a thread per connection.

The Unix socket is made with mode 0600 and serves only peers of the
daemon's own uid or root (SO_PEERCRED). The optional TCP listener serves
only requests that carry the shared token. Each line read is one request;
every request, good or bad, gets exactly one reply line, and only a
refused peer loses its connection.
"""

import hmac
import os
import socket
import stat
import struct
import threading

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


class Server:
    """Listens, reads requests and hands them to ``handler(request)``.

    ``handler`` returns the reply fields or raises
    :class:`protocol.ProtocolError`.
    """

    def __init__(self, group, handler, token=None):
        self.conf = group
        self.handler = handler
        self._token = token.encode() if token else None
        self._listeners = []
        self._lock = threading.Lock()
        self._connections = 0
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
            with self._lock:
                busy = self._connections >= self.conf.max_connections
                if not busy:
                    self._connections += 1
            if busy:
                self._refuse(conn, protocol.BUSY, 'too many connections')
                continue
            threading.Thread(target=self._serve, args=(conn, transport),
                             daemon=True, name='conn-%s' % transport).start()

    def _refuse(self, conn, code, message):
        try:
            conn.sendall(protocol.encode(protocol.error(None, code, message)))
        except OSError:
            pass
        conn.close()

    def _serve(self, conn, transport):
        try:
            if transport == 'unix':
                uid = peer_uid(conn)
                if uid not in self._allowed_uids:
                    LOG.warning('Refused a Unix peer of uid %d', uid)
                    self._refuse(conn, protocol.FORBIDDEN,
                                 'uid %d may not use this daemon' % uid)
                    return
            lines = protocol.iter_lines(conn.recv,
                                        self.conf.max_request_bytes)
            for line in lines:
                if line is protocol.TOO_LONG:
                    reply, close = protocol.error(
                        None, protocol.TOO_LARGE, 'request longer than %d '
                        'bytes' % self.conf.max_request_bytes), False
                elif not line.strip():
                    continue
                else:
                    reply, close = self._handle(line, transport)
                conn.sendall(protocol.encode(reply))
                if close:
                    return
        except OSError as exc:
            LOG.debug('Connection ended: %s', exc)
        finally:
            conn.close()
            with self._lock:
                self._connections -= 1

    def _handle(self, line, transport):
        """One request line -> ``(reply, close_connection)``."""
        rid = None
        try:
            request = protocol.parse_request(line)
            rid = request.get('id')
            if transport == 'tcp' and not self._token_ok(request):
                LOG.warning('Refused a TCP request with a missing or wrong '
                            'token')
                return protocol.error(rid, protocol.UNAUTHORIZED,
                                      'missing or wrong token'), True
            return protocol.ok(rid, **self.handler(request)), False
        except protocol.ProtocolError as exc:
            return protocol.error(exc.request_id if rid is None else rid,
                                  exc.code, exc.message), False
        except Exception as exc:
            LOG.exception('Request failed')
            return protocol.error(rid, protocol.INTERNAL,
                                  '%s: %s' % (type(exc).__name__, exc)), False

    def _token_ok(self, request):
        token = request.get('token')
        return token is not None and hmac.compare_digest(
            token.encode(), self._token)
