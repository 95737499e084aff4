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

"""The readiness notice: the one contract between taskd and the launcher.

When the task daemon in a VM is warm it POSTs a notice to the URL the
launcher wrote into that VM's user-data, ``https://HOST:PORT/ready/<key>``.
The body is one JSON object (:data:`SCHEMA`)::

    {"v": 2, "key": "<key>", "address": "tcp:HOST:PORT", "ready_at": <time>,
     "preloaded": [...], "pid": <pid>}

and the header ``X-Mlaccel-Signature`` carries the hex HMAC-SHA256 of the
raw body under the VM's own token (:func:`sign`), so the launcher knows
which VM sent it: no other VM and no network peer holds that token. Both
ends use this module: the daemon builds the body with :func:`notice` and
:func:`encode`, the launcher checks it with :func:`verify` and
:func:`parse`.
"""

import hashlib
import hmac
import json
import urllib.parse

import jsonschema

#: Version of the notice; a launcher refuses any other.
VERSION = 2
PATH_PREFIX = '/ready/'
SIGNATURE_HEADER = 'X-Mlaccel-Signature'
MAX_BODY_BYTES = 16384
#: Hosts meaning "every interface": a daemon bound there cannot name the
#: address it is reached at; the launcher uses where the push came from.
WILDCARDS = ('', '0.0.0.0', '::', '[::]')
KEY_PATTERN = r'^[A-Za-z0-9_-]{1,128}$'

SCHEMA = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['v', 'key', 'address', 'ready_at'],
    'properties': {
        'v': {'const': VERSION},
        'key': {'type': 'string', 'pattern': KEY_PATTERN},
        # The daemon reports the address it serves on; the launcher decides
        # which addresses it trusts (see mlaccel.launcher.ready_listener).
        'address': {'type': 'string', 'maxLength': 4096,
                    'pattern': r'^(tcp:\S+:[0-9]{1,5}|unix:\S+)$'},
        'ready_at': {'type': 'number', 'exclusiveMinimum': 0,
                     'maximum': 1e11},
        'preloaded': {'type': 'array', 'maxItems': 256,
                      'items': {'type': 'string', 'maxLength': 512}},
        'pid': {'type': ['integer', 'null'], 'minimum': 1},
    },
}
_VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


class BadNotice(ValueError):
    """A notice that does not follow :data:`SCHEMA`."""


def key_of(url):
    """The key the launcher put in a readiness URL: its last segment."""
    return urllib.parse.urlsplit(url).path.rstrip('/').rpartition('/')[2]


def notice(url, address, ready_at, preloaded, pid):
    """The notice a daemon serving at ``address`` pushes to ``url``."""
    return {'v': VERSION, 'key': key_of(url), 'address': address,
            'ready_at': ready_at, 'preloaded': list(preloaded), 'pid': pid}


def encode(body):
    """The bytes sent (and signed) for a notice."""
    return json.dumps(body, separators=(',', ':')).encode()


def sign(token, body):
    """Hex HMAC-SHA256 of the raw ``body`` bytes under ``token``."""
    return hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


def verify(token, body, signature):
    """Whether ``signature`` is :func:`sign` of ``body`` under ``token``."""
    if not isinstance(signature, str) or not signature.isascii() or \
            not token:
        return False
    return hmac.compare_digest(sign(token, body), signature.strip().lower())


def parse(body, key):
    """Decode and validate a notice pushed to ``key``'s URL; return it.

    Raises :class:`BadNotice` with a message fit for the reply, also for
    JSON nested too deeply to decode.
    """
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadNotice('body is not JSON: %s' % exc)
    except RecursionError:
        raise BadNotice('body is not JSON: nested too deeply')
    if not isinstance(data, dict):
        raise BadNotice('body must be a JSON object')
    if data.get('v') != VERSION:
        raise BadNotice('unsupported notice version %r, expected %d'
                        % (data.get('v'), VERSION))
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        where = '.'.join(str(p) for p in error.absolute_path) or 'body'
        raise BadNotice('%s: %s' % (where, error.message[:200]))
    if data['key'] != key:
        raise BadNotice('key in the body does not match the URL')
    return data
