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

"""Signed reports: an HMAC-SHA256 tag in front of the encoded report.

A signed report on the bus is ``mlaccel-sig1 <64 hex digits>\\n<body>``; the
tag is HMAC-SHA256 under the key of the host the report is for, over the
group and the body, so a report signed for one group does not verify in
another. An unsigned report is the body alone (JSON never starts with
``m``).
"""

import functools
import hashlib
import hmac

from mlaccel.statebus import keys

PREFIX = b'mlaccel-sig1 '
_TAG_HEX = 64
_HEADER = len(PREFIX) + _TAG_HEX + 1


class BadSignature(ValueError):
    """A report that is unsigned, or whose tag does not verify."""


def _tag(key, group, body):
    mac = hmac.new(key, b'mlaccel-report\0', hashlib.sha256)
    mac.update(group)
    mac.update(b'\0')
    mac.update(body)
    return mac.hexdigest().encode('ascii')


def sign(key, group, body):
    """``body`` (bytes) signed with ``key`` for ``group`` (bytes)."""
    return PREFIX + _tag(key, group, body) + b'\n' + body


def split(raw):
    """``(tag or None, body)`` of a report as read from the bus.

    :raises BadSignature: if it starts like a signed report but is not one.
    """
    if not raw.startswith(PREFIX):
        return None, raw
    if len(raw) < _HEADER or raw[_HEADER - 1:_HEADER] != b'\n':
        raise BadSignature('malformed signature header')
    return raw[len(PREFIX):_HEADER - 1], raw[_HEADER:]


def verify(key, group, raw):
    """The body of ``raw`` if it is signed with ``key`` for ``group``.

    :raises BadSignature: if it is unsigned or signed otherwise.
    """
    tag, body = split(raw)
    _check(key, group, tag, body)
    return body


def _check(key, group, tag, body):
    if tag is None:
        raise BadSignature('report is not signed')
    if not hmac.compare_digest(tag, _tag(key, group, body)):
        raise BadSignature('signature does not verify')


class Verifier:
    """Checks reports read from one group.

    :param secret: the deployment secret (bytes), or ``None``: then every
        report is accepted as it is, signed or not, unverified.
    :param group: the tooz group (bytes) the reports were read from.
    """

    def __init__(self, secret, group):
        self.secret = secret
        self.group = group
        self._key = functools.lru_cache(maxsize=65536)(
            functools.partial(keys.derive, secret)) if secret else None

    @property
    def authenticated(self):
        return self.secret is not None

    def body(self, raw, host):
        """The body of ``raw`` if it may be used as ``host``'s report.

        :raises BadSignature: if a secret is set and ``raw`` is unsigned or
            not signed with ``host``'s key.
        """
        tag, body = split(raw)
        if self._key is not None:
            try:
                _check(self._key(host), self.group, tag, body)
            except BadSignature as exc:
                raise BadSignature('%s with the key of host %s'
                                   % (exc, host))
        return body
