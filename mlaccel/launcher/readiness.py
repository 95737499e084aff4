"""The HTTP listener that receives the task daemons' readiness pushes.

Each VM of a launch gets its own URL ``http://HOST:PORT/ready/<key>`` in its
user-data; the key is random, so it both names the VM and proves that the
push comes from a guest the launcher booted. When the daemon in the guest is
warm it POSTs a JSON body::

    {"v": 1, "key": "<key>", "address": "tcp:HOST:PORT", "ready_at": <time>,
     "preloaded": [...], "pid": <pid>}

The listener validates it, resolves a wildcard address (``0.0.0.0``) to the
address the push came from and hands a :class:`Readiness` to the callback
registered for the key. A push repeated by the daemon's retries is
acknowledged and ignored. Bad requests get a 4xx JSON reply and never reach
a callback; the listener keeps serving.
"""

import dataclasses
import http.server
import ipaddress
import json
import secrets
import socket
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
PATH_PREFIX = '/ready/'
MAX_BODY_BYTES = 16384
#: Seconds a client may take to send its request before it is dropped.
REQUEST_TIMEOUT = 10.0
_WILDCARDS = ('', '0.0.0.0', '::', '[::]')


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
    host, sep, port = address[len('tcp:'):].rpartition(':')
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadPush(400, 'bad port in address %r' % address[:100])
    if host in _WILDCARDS:
        host = peer
    bare = host[1:-1] if host.startswith('[') and host.endswith(']') \
        else host
    try:
        if ipaddress.ip_address(bare).version == 6:
            host = '[%s]' % bare
    except ValueError:
        pass  # a host name: kept as it is
    return 'tcp:%s:%s' % (host, port)


def parse_push(key, body, peer, received_at):
    """Validate a push body for ``key``; return a :class:`Readiness`."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadPush(400, 'body is not JSON: %s' % exc)
    if not isinstance(data, dict):
        raise BadPush(400, 'body must be a JSON object')
    if data.get('v') != PROTOCOL_VERSION:
        raise BadPush(400, 'unsupported protocol version %r, expected %d'
                      % (data.get('v'), PROTOCOL_VERSION))
    if data.get('key') != key:
        raise BadPush(400, 'key in the body does not match the URL')
    ready_at = data.get('ready_at')
    if isinstance(ready_at, bool) or not isinstance(ready_at, (int, float)) \
            or not 0 < ready_at < 1e11:
        raise BadPush(400, 'ready_at must be a UNIX time')
    preloaded = data.get('preloaded', [])
    if not isinstance(preloaded, list) or not all(
            isinstance(name, str) for name in preloaded):
        raise BadPush(400, 'preloaded must be a list of module names')
    pid = data.get('pid')
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        raise BadPush(400, 'pid must be an integer')
    return Readiness(key=key,
                     address=resolve_address(data.get('address'), peer),
                     ready_at=float(ready_at), received_at=received_at,
                     peer=peer, preloaded=tuple(preloaded), pid=pid)


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = 'mlaccel-launcher'
    timeout = REQUEST_TIMEOUT

    def do_POST(self):
        received_at = time.time()
        try:
            key = self._key()
            listener = self.server.listener
            if not listener.expects(key):
                raise BadPush(404, 'no VM waits for this readiness key')
            length = self.headers.get('Content-Length')
            if length is None or not length.isdigit():
                raise BadPush(411, 'Content-Length required')
            if int(length) > MAX_BODY_BYTES:
                raise BadPush(413, 'body larger than %d bytes'
                              % MAX_BODY_BYTES)
            body = self.rfile.read(int(length))
            readiness = parse_push(key, body, self.client_address[0],
                                   received_at)
            listener.deliver(readiness)
        except BadPush as exc:
            LOG.warning('Rejected readiness push from %s: %s',
                        self.client_address[0], exc)
            self._reply(exc.status, {'ok': False, 'error': str(exc)})
        else:
            self._reply(200, {'ok': True})

    def do_GET(self):
        self._reply(405, {'ok': False, 'error': 'use POST'})

    do_PUT = do_DELETE = do_GET

    def _key(self):
        if not self.path.startswith(PATH_PREFIX):
            raise BadPush(404, 'unknown path')
        key = self.path[len(PATH_PREFIX):]
        if not key or '/' in key or len(key) > 128:
            raise BadPush(404, 'unknown path')
        return key

    def _reply(self, status, data):
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, fmt, *args):
        LOG.debug('readiness listener: ' + fmt, *args)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class ReadinessListener:
    """Serve readiness pushes on ``host:port`` in a background thread.

    :param host: address to bind (``0.0.0.0``: every interface).
    :param port: port to bind; 0 picks a free one (see :attr:`port`).
    :param advertise_host: host name or address the guests use to reach
        the listener; defaults to ``host`` unless that is a wildcard.
    """

    def __init__(self, host='0.0.0.0', port=0, advertise_host=None):
        if advertise_host is None and host in _WILDCARDS:
            raise ValueError('advertise_host is required when listening on '
                             'a wildcard address')
        self._bind = (host, port)
        self.advertise_host = advertise_host or host
        self._callbacks = {}
        self._delivered = set()
        self._lock = threading.Lock()
        self._server = None
        self._thread = None
        self._stopping = False

    @property
    def port(self):
        return self._server.server_address[1]

    def start(self):
        if self._server is not None:
            return self
        host = self._bind[0]
        server_class = _Server6 if ':' in host else _Server
        self._server = server_class(self._bind, _Handler)
        self._server.listener = self
        self._stopping = False
        self._thread = threading.Thread(
            target=self._accept_loop, name='mlaccel-readiness', daemon=True)
        self._thread.start()
        LOG.debug('Readiness listener on %s:%d', host, self.port)
        return self

    def _accept_loop(self):
        # A plain blocking accept() rather than serve_forever(): socketserver
        # binds its selector class at import time, so imported before an
        # eventlet monkey patch it would block every green thread.
        server = self._server
        while not self._stopping:
            try:
                request, address = server.socket.accept()
            except OSError as exc:
                if not self._stopping:
                    LOG.error('Readiness listener stopped: %s', exc)
                return
            if self._stopping:
                request.close()
                return
            server.process_request(request, address)  # one thread each

    def stop(self):
        if self._server is None:
            return
        self._stopping = True
        host, port = self._server.server_address[:2]
        if host in _WILDCARDS:
            host = '::1' if ':' in host else '127.0.0.1'
        try:  # wake the blocked accept()
            socket.create_connection((host, port), timeout=2).close()
        except OSError as exc:
            LOG.debug('Waking the readiness listener failed: %s', exc)
        self._thread.join(5)
        self._server.server_close()
        self._server = self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def url_for(self, key):
        host = self.advertise_host
        if ':' in host and not host.startswith('['):
            host = '[%s]' % host
        return 'http://%s:%d%s%s' % (host, self.port, PATH_PREFIX, key)

    def expect(self, key, callback):
        """Call ``callback(readiness)`` once when ``key`` is pushed."""
        with self._lock:
            self._callbacks[key] = callback

    def forget(self, key):
        with self._lock:
            self._callbacks.pop(key, None)
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
