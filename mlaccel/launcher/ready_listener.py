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

"""The HTTPS listener that receives the task daemons' readiness pushes.

Each VM of a launch gets its own URL ``https://HOST:PORT/ready/<key>``, its
own token and the listener's certificate in its user-data. The daemon pins
that certificate and signs its notice with the token (see
:mod:`mlaccel.readiness`); the listener checks the signature with the token
of the VM the key names before it even decodes the body, validates the
notice, resolves a wildcard address (``0.0.0.0``) to the address the push
came from and hands a :class:`Readiness` to the callback registered for the
key. A push repeated by the daemon's retries is acknowledged and ignored.
The address a push names is only a hint: the launcher reaches a daemon only
at an address Nova lists for its server (:func:`daemon_address`).

The listener is written for hostile peers: at most ``max_connections``
connections (each with its own thread), and ``max_per_peer`` from one
address, are served at once, further ones are closed at once; each has
``request_timeout`` seconds for the whole request, TLS handshake included,
however slowly it trickles in; every bad request gets a JSON reply with its
HTTP status and never reaches a callback; the accept loop survives every
error until :meth:`ReadinessListener.stop`.
"""

import dataclasses
import errno
import http.client
import io
import ipaddress
import json
import os
import secrets
import socket
import ssl
import tempfile
import threading
import time

from oslo_log import log as logging

from mlaccel import readiness as notices
from mlaccel.taskd import protocol
from mlaccel import tls

LOG = logging.getLogger(__name__)

PATH_PREFIX = notices.PATH_PREFIX
MAX_BODY_BYTES = notices.MAX_BODY_BYTES
MAX_HEADER_BYTES = 8192
#: Seconds a client has for its whole request, TLS handshake included.
REQUEST_TIMEOUT = 10.0
#: Connections served at once; more are closed unanswered.
MAX_CONNECTIONS = 64
#: Connections from one address served at once, so that one peer cannot
#: take every slot.
MAX_PER_PEER = 8
#: Seconds a reply may take to send to a client that does not read it.
REPLY_TIMEOUT = 2.0
_WILDCARDS = notices.WILDCARDS
#: accept() errors after which the listening socket is gone for good.
_FATAL_ACCEPT = (errno.EBADF, errno.EINVAL, errno.ENOTSOCK)


class BadPush(ValueError):
    """A readiness push that cannot be accepted; ``status`` is the reply."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Readiness:
    """One accepted readiness push."""

    key: str
    address: str
    ready_at: float
    received_at: float
    peer: str
    preloaded: tuple = ()
    pid: int = None

    def to_dict(self):
        data = dataclasses.asdict(self)
        data['preloaded'] = list(self.preloaded)
        return data


def new_key():
    """A fresh unguessable key naming one VM's readiness URL."""
    return secrets.token_urlsafe(18)


def resolve_address(address, peer):
    """The daemon's client address, with a wildcard host made ``peer``.

    ``address`` is ``tcp:HOST:PORT`` (IPv6 hosts in brackets) or
    ``unix:PATH``. A daemon listening on all interfaces reports
    ``0.0.0.0``; the launcher then reaches it where its push came from.
    """
    if not isinstance(address, str) or len(address) > 4096:
        raise BadPush(400, 'address must be a string')
    if address.startswith('unix:') and len(address) > len('unix:'):
        return address
    if not address.startswith('tcp:'):
        raise BadPush(400, 'address must be tcp:HOST:PORT or unix:PATH, '
                           'got %r' % address[:100])
    try:
        host, port = protocol.parse_tcp_address(address[len('tcp:'):])
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise BadPush(400, 'bad port in address %r' % address[:100])
    if host in _WILDCARDS:
        host = peer
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        pass  # a host name: kept as it is
    return protocol.format_tcp_address(host, port)


def _ip(text):
    """``text`` as an IP address (IPv4-mapped IPv6 as IPv4), else None."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return getattr(ip, 'ipv4_mapped', None) or ip


def server_addresses(addresses):
    """The IP addresses in a server's ``addresses``, floating ones first.

    ``addresses`` is the attribute of Nova's API, ``{network: [{"addr":
    ..., "OS-EXT-IPS:type": "fixed" or "floating"}, ...]}``; entries that
    are not IP addresses are left out.
    """
    floating, fixed = [], []
    for entries in (addresses or {}).values():
        for entry in entries or ():
            ip = _ip(entry.get('addr'))
            if ip is not None:
                kind = entry.get('OS-EXT-IPS:type')
                (floating if kind == 'floating' else fixed).append(ip)
    return tuple(dict.fromkeys(floating + fixed))


def daemon_address(ready, listed):
    """Where to reach the daemon that pushed ``ready``, or None: nowhere.

    Only an address Nova lists for the VM's server (``listed``, see
    :func:`server_addresses`) is used, whatever the push names: the pushed
    host if Nova lists it, else the push's source if Nova lists that, else
    the first address Nova lists; the port is the pushed one. A server Nova
    lists no address for has no network of Nova's: its guest can only be a
    process on the launcher's own host (as in the test cloud), reached only
    where its push came from and only if that is a loopback address.
    """
    host, port = protocol.parse_tcp_address(ready.address[len('tcp:'):])
    peer = _ip(ready.peer)
    if not listed:
        listed = (peer,) if peer is not None and peer.is_loopback else ()
    choice = next((ip for ip in (_ip(host), peer) if ip in listed),
                  listed[0] if listed else None)
    if choice is None:
        return None
    return protocol.format_tcp_address(str(choice), port)


def parse_push(key, body, peer, received_at):
    """Validate a (verified) push body for ``key``; return a Readiness."""
    try:
        data = notices.parse(body, key)
    except notices.BadNotice as exc:
        raise BadPush(400, str(exc))
    return Readiness(key=key,
                     address=resolve_address(data['address'], peer),
                     ready_at=float(data['ready_at']),
                     received_at=received_at, peer=peer,
                     preloaded=tuple(data.get('preloaded', ())),
                     pid=data.get('pid'))


class _TLSConnection:
    """Server side of TLS over a plain socket, every wait within a deadline.

    The TLS state machine runs in memory (``ssl.MemoryBIO``) and every read
    and write of the socket waits at most until ``deadline``, so a peer
    trickling its handshake or request cannot extend it, with native
    threads and under eventlet alike (whose TLS sockets restart the timeout
    at each wait).
    """

    def __init__(self, sock, context, deadline):
        self.sock = sock
        self.deadline = deadline
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing,
                                     server_side=True)

    def _arm(self):
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError('deadline passed')
        self.sock.settimeout(remaining)

    def _flush(self):
        data = self._outgoing.read()
        if data:
            self._arm()
            self.sock.sendall(data)

    def _run(self, operation, *args):
        while True:
            try:
                result = operation(*args)
            except ssl.SSLWantReadError:
                self._flush()
                self._arm()
                data = self.sock.recv(65536)
                if data:
                    self._incoming.write(data)
                else:
                    self._incoming.write_eof()
                continue
            self._flush()
            return result

    def handshake(self):
        self._run(self._tls.do_handshake)

    def recv(self, size):
        """Up to ``size`` bytes; ``b''`` when the peer closed."""
        try:
            return self._run(self._tls.read, size)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return b''

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[self._run(self._tls.write, view):]

    def close(self):
        self.sock.close()


class _Request:
    """One HTTP request read from a connection within its deadline."""

    def __init__(self, conn):
        self.conn = conn
        self.buffer = bytearray()

    def _recv(self):
        try:
            data = self.conn.recv(65536)
        except (socket.timeout, TimeoutError):
            raise BadPush(408, 'request not received in time')
        if not data:
            raise ConnectionResetError('client closed the connection')
        self.buffer += data

    def read(self):
        """``(method, path, headers, body)`` of the request."""
        while b'\r\n\r\n' not in self.buffer:
            if len(self.buffer) > MAX_HEADER_BYTES:
                raise BadPush(431, 'request header larger than %d bytes'
                              % MAX_HEADER_BYTES)
            self._recv()
        head, _, rest = bytes(self.buffer).partition(b'\r\n\r\n')
        if len(head) > MAX_HEADER_BYTES:
            raise BadPush(431, 'request header larger than %d bytes'
                          % MAX_HEADER_BYTES)
        line, _, fields = head.partition(b'\r\n')
        parts = line.decode('latin-1').split(' ')
        if len(parts) != 3 or not parts[2].startswith('HTTP/1.'):
            raise BadPush(400, 'not an HTTP/1.x request line')
        try:
            headers = http.client.parse_headers(io.BytesIO(fields + b'\r\n'))
        except http.client.HTTPException as exc:
            raise BadPush(400, 'bad request header: %s' % exc)
        return parts[0], parts[1], headers, rest

    def body(self, rest, length):
        self.buffer = bytearray(rest)
        while len(self.buffer) < length:
            self._recv()
        return bytes(self.buffer[:length])


class ReadinessListener:
    """Serve readiness pushes over HTTPS on ``host:port``.

    :param host: address to bind (``0.0.0.0``: every interface).
    :param port: port to bind; 0 picks a free one (see :attr:`port`).
    :param advertise_host: host name or address the guests use to reach
        the listener; defaults to ``host`` unless that is a wildcard.
    :param cert_file: the operator's certificate (PEM, possibly followed
        by its chain, which the guests receive; they pin the first
        certificate alone) and ``key_file`` its key. By default a fresh
        self-signed identity is made for the listener.
    :param max_connections: connections served at once.
    :param max_per_peer: connections from one address served at once.
    :param request_timeout: seconds for a whole request.
    """

    def __init__(self, host='0.0.0.0', port=0, advertise_host=None,
                 cert_file=None, key_file=None,
                 max_connections=MAX_CONNECTIONS,
                 max_per_peer=MAX_PER_PEER, request_timeout=REQUEST_TIMEOUT):
        if advertise_host is None and host in _WILDCARDS:
            raise ValueError('advertise_host is required when listening on '
                             'a wildcard address')
        if bool(cert_file) != bool(key_file):
            raise ValueError('give both a certificate and a key file, or '
                             'neither')
        self._bind = (host, port)
        self.advertise_host = advertise_host or host
        self._cert_files = (cert_file, key_file)
        self.cert_pem = None
        self._context = None
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self._per_peer = {}
        self.request_timeout = request_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._callbacks = {}
        self._tokens = {}
        self._delivered = set()
        self._lock = threading.Lock()
        self._sock = None
        self._thread = None
        self._stopping = False
        self._last_warning = None

    @property
    def port(self):
        return self._sock.getsockname()[1]

    def _load_identity(self):
        cert_file, key_file = self._cert_files
        if cert_file:
            with open(cert_file) as stream:
                self.cert_pem = stream.read()
            self._context = tls.server_context(cert_file, key_file)
            return
        identity = tls.new_identity('mlaccel-readiness')
        with tempfile.TemporaryDirectory(prefix='mlaccel-tls-') as private:
            os.chmod(private, 0o700)
            self._context = identity.server_context(private)
        self.cert_pem = identity.cert_pem

    def start(self):
        if self._sock is not None:
            return self
        if self._context is None:
            self._load_identity()
        host = self._bind[0]
        family = socket.AF_INET6 if ':' in host else socket.AF_INET
        self._sock = socket.create_server(self._bind, family=family,
                                          backlog=128)
        self._stopping = False
        self._thread = threading.Thread(
            target=self._accept_loop, name='mlaccel-readiness', daemon=True)
        self._thread.start()
        LOG.debug('Readiness listener on %s:%d', host, self.port)
        return self

    def _warn(self, message, *args):
        """A warning at most every 10 s: a flood must not flood the log."""
        now = time.monotonic()
        with self._lock:
            if self._last_warning is not None and \
                    now - self._last_warning < 10.0:
                return
            self._last_warning = now
        LOG.warning(message, *args)

    def _accept_loop(self):
        # A plain blocking accept() rather than socketserver's
        # serve_forever(): socketserver binds its selector class at import
        # time, so imported before an eventlet monkey patch it would block
        # every green thread.
        listening = self._sock
        while not self._stopping:
            try:
                conn, address = listening.accept()
            except OSError as exc:
                if self._stopping or exc.errno in _FATAL_ACCEPT:
                    if not self._stopping:
                        LOG.error('Readiness listener stopped: %s', exc)
                    return
                # Out of descriptors or memory, an aborted connection: wait
                # a moment and serve on.
                self._warn('Readiness listener cannot accept: %s', exc)
                time.sleep(0.1)
                continue
            if self._stopping:
                conn.close()
                return
            self._dispatch(conn, address)

    def _take_slot(self, peer):
        with self._lock:
            if self._per_peer.get(peer, 0) >= self.max_per_peer:
                return False
            if not self._slots.acquire(blocking=False):
                return False
            self._per_peer[peer] = self._per_peer.get(peer, 0) + 1
            return True

    def _release_slot(self, peer):
        with self._lock:
            self._per_peer[peer] -= 1
            if not self._per_peer[peer]:
                del self._per_peer[peer]
            self._slots.release()

    def _dispatch(self, conn, address):
        peer = address[0]
        if not self._take_slot(peer):
            self._warn('Readiness listener: too many connections open, '
                       'closing one from %s', peer)
            conn.close()
            return
        try:
            threading.Thread(target=self._serve, args=(conn, address),
                             name='mlaccel-readiness-conn',
                             daemon=True).start()
        except Exception as exc:  # e.g. RuntimeError: can't start thread
            self._release_slot(peer)
            conn.close()
            self._warn('Readiness listener cannot start a thread: %s', exc)

    def _serve(self, sock, address):
        peer = address[0]
        conn = _TLSConnection(sock, self._context,
                              time.monotonic() + self.request_timeout)
        try:
            conn.handshake()
        except (OSError, ValueError) as exc:
            LOG.debug('TLS handshake with %s failed: %s', peer, exc)
            conn.close()
            self._release_slot(peer)
            return
        try:
            status, reply = self._handle(conn, peer)
        except (OSError, ValueError) as exc:
            LOG.debug('Readiness connection from %s: %s', peer, exc)
            status = None
        except Exception:
            LOG.exception('Readiness push from %s failed', peer)
            status, reply = 500, {'ok': False, 'error': 'internal error'}
        try:
            if status is not None:
                self._reply(conn, status, reply)
        except (OSError, ValueError) as exc:
            LOG.debug('Reply to %s failed: %s', peer, exc)
        finally:
            conn.close()
            self._release_slot(peer)

    def _handle(self, conn, peer):
        received_at = time.time()
        request = _Request(conn)
        try:
            method, path, headers, rest = request.read()
            length = headers.get('Content-Length')
            body = None
            if length is not None and length.isdigit() and \
                    int(length) <= 4 * MAX_BODY_BYTES:
                # Read even a body refused below, so that the client sees
                # the reply, not the reset of a socket closed unread.
                body = request.body(rest, int(length))
            if method != 'POST':
                raise BadPush(405, 'use POST')
            key = self._key(path)
            token = self._token(key)
            if length is None or not length.isdigit():
                raise BadPush(411, 'Content-Length required')
            if body is None or len(body) > MAX_BODY_BYTES:
                raise BadPush(413, 'body larger than %d bytes'
                              % MAX_BODY_BYTES)
            if not notices.verify(token, body,
                                  headers.get(notices.SIGNATURE_HEADER)):
                raise BadPush(401, 'missing or wrong %s'
                              % notices.SIGNATURE_HEADER)
            self.deliver(parse_push(key, body, peer, received_at))
        except BadPush as exc:
            # Rate-limited: a peer sending bad requests must not flood the
            # log; each one is logged at debug level.
            LOG.debug('Rejected readiness push from %s: %s', peer, exc)
            self._warn('Rejected readiness push from %s: %s', peer, exc)
            return exc.status, {'ok': False, 'error': str(exc)}
        return 200, {'ok': True}

    @staticmethod
    def _key(path):
        if not path.startswith(PATH_PREFIX):
            raise BadPush(404, 'unknown path')
        key = path[len(PATH_PREFIX):]
        if not key or '/' in key or len(key) > 128:
            raise BadPush(404, 'unknown path')
        return key

    def _token(self, key):
        with self._lock:
            if key not in self._callbacks:
                raise BadPush(404, 'no VM waits for this readiness key')
            return self._tokens[key]

    @staticmethod
    def _reply(conn, status, data):
        body = json.dumps(data).encode()
        head = ('HTTP/1.1 %d %s\r\nServer: mlaccel-launcher\r\n'
                'Content-Type: application/json\r\nContent-Length: %d\r\n'
                'Connection: close\r\n\r\n' % (
                    status, http.client.responses.get(status, ''),
                    len(body)))
        # Also after a request that ran out of time: the reply gets its own.
        conn.deadline = time.monotonic() + REPLY_TIMEOUT
        conn.sendall(head.encode() + body)

    def stop(self):
        if self._sock is None:
            return
        self._stopping = True
        host, port = self._sock.getsockname()[:2]
        if host in _WILDCARDS:
            host = '::1' if ':' in host else '127.0.0.1'
        try:  # wake the blocked accept()
            socket.create_connection((host, port), timeout=2).close()
        except OSError as exc:
            LOG.debug('Waking the readiness listener failed: %s', exc)
        self._thread.join(5)
        self._sock.close()
        self._sock = self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def url_for(self, key):
        host = self.advertise_host
        if ':' in host and not host.startswith('['):
            host = '[%s]' % host
        return 'https://%s:%d%s%s' % (host, self.port, PATH_PREFIX, key)

    def expect(self, key, callback, token):
        """Call ``callback(readiness)`` once when ``key`` is pushed.

        Only a push signed with ``token`` (the VM's own) is accepted.
        """
        if not token:
            raise ValueError('a readiness key needs its VM\'s token')
        with self._lock:
            self._callbacks[key] = callback
            self._tokens[key] = token

    def forget(self, key):
        with self._lock:
            self._callbacks.pop(key, None)
            self._tokens.pop(key, None)
            self._delivered.discard(key)

    def expects(self, key):
        with self._lock:
            return key in self._callbacks

    def deliver(self, readiness):
        """Hand ``readiness`` to its callback unless already delivered."""
        with self._lock:
            callback = self._callbacks.get(readiness.key)
            if callback is None or readiness.key in self._delivered:
                return False
            self._delivered.add(readiness.key)
        callback(readiness)
        return True
