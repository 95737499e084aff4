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

"""The taskd wire protocol: versioned JSON lines.

Each request is one JSON object on one line, ``{"v": 1, "op": ..., "id":
...}`` plus the operation's fields (and ``"token"`` over TCP). Each reply is
one line echoing the request ``id``: ``{"v": 1, "id": ..., "ok": true, ...}``
or ``{"v": 1, "id": ..., "ok": false, "error": {"code": ..., "message":
...}}``. Operations: health, submit, status, wait, cancel, logs and
rekey (``new_token`` replaces the token the daemon accepts; see
:mod:`mlaccel.taskd.server`). The fields of a submit request are a
:class:`TaskSpec`. A task's status carries its state, times, result or
error, exit code, and ``leftovers_killed``: how many processes it left
behind that the daemon killed when it ended.
"""

import dataclasses
import json

import jsonschema

VERSION = 1

#: Error codes a reply may carry.
MALFORMED = 'malformed'          # not a JSON object on one line
UNSUPPORTED = 'unsupported_version'
UNKNOWN_OP = 'unknown_op'
INVALID = 'invalid'              # a known op with bad or missing fields
TOO_LARGE = 'too_large'
FORBIDDEN = 'forbidden'          # Unix peer of a foreign uid
UNAUTHORIZED = 'unauthorized'    # TCP request without the right token
NOT_FOUND = 'not_found'
DRAINING = 'draining'
BUSY = 'busy'
INTERNAL = 'internal'

MAX_ID_CHARS = 128
MAX_WAIT = 3600.0

_TASK_ID = {'type': 'string', 'pattern': '^[0-9a-f]{32}$'}
_REQUEST_ID = {'type': ['string', 'integer', 'null'],
               'maxLength': MAX_ID_CHARS}
_COMMON = {'v': {'const': VERSION}, 'op': {'type': 'string'},
           'id': _REQUEST_ID, 'token': {'type': 'string'}}


def _schema(required=(), **fields):
    return {'type': 'object', 'additionalProperties': False,
            'required': ['v', 'op'] + list(required),
            'properties': dict(_COMMON, **fields)}


_NULLABLE_INT = {'type': ['integer', 'null']}
SCHEMAS = {
    'health': _schema(),
    'submit': _schema(
        ['entry'],
        # A registered task name, or "module:function" where allowed.
        entry={'type': 'string', 'maxLength': 512,
               'pattern': r'^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$'},
        args={'type': ['object', 'null']},
        env={'type': ['object', 'null'],
             'additionalProperties': {'type': 'string'},
             'propertyNames': {'pattern': r'^[A-Za-z_][A-Za-z0-9_]*$'}},
        threads={'type': ['integer', 'null'], 'minimum': 1,
                 'maximum': 1024},
        seed={'type': ['integer', 'null'], 'minimum': 0,
              'maximum': 2 ** 63 - 1},
        cwd={'type': ['string', 'null'], 'maxLength': 4096},
        mode={'enum': ['fork', 'worker']},
        limits={'type': ['object', 'null'],
                'additionalProperties': {'type': 'integer', 'minimum': 0},
                'propertyNames': {'pattern': '^[a-z_]{1,16}$'}}),
    'status': _schema(['task'], task=_TASK_ID),
    'wait': _schema(['task'], task=_TASK_ID,
                    timeout={'type': ['number', 'null'], 'minimum': 0}),
    'cancel': _schema(['task'], task=_TASK_ID),
    'logs': _schema(['task'], task=_TASK_ID,
                    tail={'type': ['integer', 'null'], 'minimum': 0}),
    # The current holder hands the daemon to a new one (a pool claim):
    # from the reply on, only ``new_token`` is accepted over TCP.
    'rekey': _schema(['new_token'], new_token={
        'type': 'string', 'pattern': r'^[A-Za-z0-9._~+/=-]{16,512}$'}),
}
OPS = tuple(SCHEMAS)
_VALIDATORS = {op: jsonschema.Draft7Validator(schema)
               for op, schema in SCHEMAS.items()}


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What a submit request asks the daemon to run.

    ``entry`` is the name of a task registered in the ``mlaccel.tasks``
    entry-point namespace (e.g. ``"clip"``) or, where the daemon's
    operator allows it, ``"package.module:function"``. ``args`` is the
    task's argument dict, ``env`` extra environment variables, ``threads``
    and ``seed`` default to the daemon's choice, ``cwd`` to the daemon's
    directory; ``mode`` is ``"fork"`` or ``"worker"``; ``limits`` maps
    ``resource.RLIMIT_*`` suffixes (``"nofile"``) to values that may only
    lower the operator's limits. The dicts are copied; treat them as
    read-only. Raises ``ValueError`` for fields the protocol's schema
    refuses.
    """

    entry: str
    args: dict = dataclasses.field(default_factory=dict)
    env: dict = dataclasses.field(default_factory=dict)
    threads: int = None
    seed: int = None
    cwd: str = None
    mode: str = 'fork'
    limits: dict = None

    def __post_init__(self):
        for name in ('args', 'env', 'limits'):
            value = getattr(self, name)
            if isinstance(value, dict):
                object.__setattr__(self, name, dict(value))
            elif value is None and name != 'limits':
                object.__setattr__(self, name, {})
        error = jsonschema.exceptions.best_match(
            _VALIDATORS['submit'].iter_errors(
                request('submit', **self.to_wire())))
        if error is not None:
            raise ValueError('invalid task %s: %s' % (
                '.'.join(str(p) for p in error.absolute_path) or 'spec',
                error.message))

    def to_wire(self):
        """The submit request's fields, ``None`` values left out."""
        return {field.name: getattr(self, field.name)
                for field in dataclasses.fields(self)
                if getattr(self, field.name) is not None}

    @classmethod
    def from_wire(cls, message):
        """The spec of a submit request (other request fields ignored)."""
        return cls(**{field.name: message[field.name]
                      for field in dataclasses.fields(cls)
                      if message.get(field.name) is not None})


class ProtocolError(Exception):
    """A request that cannot be served; becomes an error reply."""

    def __init__(self, code, message, request_id=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


def parse_request(line):
    """Decode and validate one request line (bytes); return the dict.

    Raises :class:`ProtocolError` with the code to reply with. The request
    id is recovered whenever the line is a JSON object, so that even a
    rejected request gets an error reply the client can match.
    """
    try:
        request = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(MALFORMED, 'request is not JSON: %s' % exc)
    if not isinstance(request, dict):
        raise ProtocolError(MALFORMED, 'request is not a JSON object')
    rid = request.get('id')
    if not (rid is None or isinstance(rid, int) or
            (isinstance(rid, str) and len(rid) <= MAX_ID_CHARS)):
        rid = None
    if request.get('v') != VERSION:
        raise ProtocolError(
            UNSUPPORTED, 'protocol version %r is not supported; this daemon '
            'speaks version %d' % (request.get('v'), VERSION), rid)
    op = request.get('op')
    if not isinstance(op, str) or op not in _VALIDATORS:
        raise ProtocolError(
            UNKNOWN_OP, 'unknown op %r; expected one of %s'
            % (op, ', '.join(OPS)), rid)
    error = jsonschema.exceptions.best_match(
        _VALIDATORS[op].iter_errors(request))
    if error is not None:
        where = '.'.join(str(p) for p in error.absolute_path) or 'request'
        raise ProtocolError(INVALID, '%s: %s' % (where, error.message), rid)
    return request


def parse_tcp_address(address):
    """``"HOST:PORT"`` or ``"[V6]:PORT"`` -> ``(host, port)``."""
    host, sep, port = address.rpartition(':')
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError('TCP address %r is not HOST:PORT' % address)
    return host.strip('[]'), int(port)


def format_tcp_address(host, port):
    """The client address ``"tcp:HOST:PORT"`` of a TCP listener."""
    return 'tcp:%s:%d' % ('[%s]' % host if ':' in host else host, port)


def encode(message):
    """One message as a JSON line (bytes)."""
    return (json.dumps(message, separators=(',', ':')) + '\n').encode()


def request(op, request_id=None, **fields):
    """A request message (``None`` fields are left out)."""
    message = {'v': VERSION, 'op': op, 'id': request_id}
    message.update((k, v) for k, v in fields.items() if v is not None)
    return message


def ok(request_id, **fields):
    return dict({'v': VERSION, 'id': request_id, 'ok': True}, **fields)


def error(request_id, code, message):
    return {'v': VERSION, 'id': request_id, 'ok': False,
            'error': {'code': code, 'message': message}}


#: Yielded by :func:`iter_lines` in place of a line longer than allowed.
TOO_LONG = object()


def iter_lines(read, max_bytes, chunk=65536):
    """Yield the lines (without newline) of a byte stream.

    ``read(n)`` returns up to ``n`` bytes, ``b''`` at the end. A line longer
    than ``max_bytes`` is discarded as it arrives (memory stays bounded)
    and yields :data:`TOO_LONG` once its newline is seen. A last line
    without newline is yielded too.
    """
    buf = bytearray()
    discarding = False
    while True:
        data = read(chunk)
        if not data:
            if buf and not discarding:
                yield bytes(buf)
            elif discarding:
                yield TOO_LONG
            return
        buf += data
        while True:
            end = buf.find(b'\n')
            if end < 0:
                if len(buf) > max_bytes:
                    discarding = True
                    buf.clear()
                break
            if discarding or end > max_bytes:
                discarding = False
                yield TOO_LONG
            else:
                yield bytes(buf[:end])
            del buf[:end + 1]
