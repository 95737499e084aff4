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

A signed report on the bus is
``mlaccel-sig2 <key id> <sequence> <64 hex digits>\\n<body>``; the tag is
HMAC-SHA256 under the key of the host the report is for, over the group,
the key id, the sequence number and the body, so a report signed for one
group does not verify in another and its sequence number cannot be
changed. The sequence number grows with every report of a publisher
(:mod:`mlaccel.statebus.sequence`); readers use only reports newer than the
last one they accepted of that host.

``mlaccel-sig1 <64 hex digits>\\n<body>`` (group and body only, no key id
and no sequence number) is what mlaccel signed before; readers still
verify it, so that publishers can be upgraded after the readers. An
unsigned report is the body alone (JSON never starts with ``m``).
"""

import collections
import functools
import hashlib
import hmac
import re

from mlaccel.statebus import keys

PREFIX = b'mlaccel-sig2 '
PREFIX_V1 = b'mlaccel-sig1 '
_MAX_HEADER = 160
_V1_RE = re.compile(rb'([0-9a-f]{64})')
_V2_RE = re.compile(rb'([A-Za-z0-9._-]{1,32}) (0|[1-9][0-9]{0,17}) '
                    rb'([0-9a-f]{64})')

#: A report as read from the bus: ``version`` (``None``: unsigned, 1 or 2),
#: ``key_id`` and ``sequence`` (``None`` but in version 2), the ``tag``
#: (bytes) and the ``body``.
Signed = collections.namedtuple('Signed',
                                'version key_id sequence tag body')


class BadSignature(ValueError):
    """A report that is unsigned, or whose tag does not verify."""


def _tag(key, group, body, key_id=None, sequence=None):
    if key_id is None:
        mac = hmac.new(key, b'mlaccel-report\0', hashlib.sha256)
    else:
        mac = hmac.new(key, b'mlaccel-report2\0', hashlib.sha256)
    mac.update(group)
    mac.update(b'\0')
    if key_id is not None:
        mac.update(b'%s\0%d\0' % (key_id.encode('ascii'), sequence))
    mac.update(body)
    return mac.hexdigest().encode('ascii')


def sign(host_key, group, sequence, body):
    """``body`` (bytes) signed for ``group`` (bytes) as number ``sequence``.

    :param host_key: a :class:`~mlaccel.statebus.keys.HostKey`.
    """
    return b'%s%s %d %s\n%s' % (
        PREFIX, host_key.id.encode('ascii'), sequence,
        _tag(host_key.key, group, body, host_key.id, sequence), body)


def sign_v1(key, group, body):
    """``body`` signed as mlaccel did before sequence numbers.

    Only for tests of readers that still take such reports.
    """
    return PREFIX_V1 + _tag(key, group, body) + b'\n' + body


def split(raw):
    """The :class:`Signed` parts of ``raw`` (bytes) as read from the bus.

    :raises BadSignature: if it starts like a signed report but is not one.
    """
    for version, prefix, pattern in ((2, PREFIX, _V2_RE),
                                     (1, PREFIX_V1, _V1_RE)):
        if raw.startswith(prefix):
            end = raw.find(b'\n', 0, _MAX_HEADER)
            match = pattern.fullmatch(raw, len(prefix), max(end, 0))
            if end < 0 or match is None:
                raise BadSignature('malformed signature header')
            body = raw[end + 1:]
            if version == 1:
                return Signed(1, None, None, match.group(1), body)
            return Signed(2, match.group(1).decode('ascii'),
                          int(match.group(2)), match.group(3), body)
    return Signed(None, None, None, None, raw)


def verifies(signed, group, key):
    """Whether the :class:`Signed` report's tag is ``key``'s (bytes)."""
    return signed.tag is not None and hmac.compare_digest(
        signed.tag, _tag(key, group, signed.body, signed.key_id,
                         signed.sequence))


class Verifier:
    """Checks reports read from one group.

    :param deployment_keys: the
        :class:`~mlaccel.statebus.keys.DeploymentKey` list of the reader, or
        ``None``: then every report is accepted as it is, unverified.
    :param group: the tooz group (bytes) the reports were read from.
    """

    def __init__(self, deployment_keys, group):
        self.deployment_keys = deployment_keys
        self.group = group
        self._derive = functools.lru_cache(maxsize=65536)(keys.derive)

    @property
    def authenticated(self):
        return self.deployment_keys is not None

    def check(self, raw, host):
        """The :class:`Signed` parts of ``raw`` if it may be ``host``'s.

        :raises BadSignature: if keys are set and ``raw`` is unsigned or
            not signed with a key of ``host``.
        """
        signed = split(raw)
        if self.deployment_keys is None:
            return signed
        if signed.version is None:
            raise BadSignature('report is not signed')
        candidates = [k for k in self.deployment_keys
                      if signed.key_id in (None, keys.UNNAMED, k.id)]
        if not candidates:
            raise BadSignature('report is signed with key %s, which this '
                               'reader does not hold' % signed.key_id)
        for k in candidates:
            if verifies(signed, self.group, self._derive(k.secret, host)):
                return signed
        raise BadSignature('signature does not verify with the key of host '
                           '%s' % host)
