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

"""The state bus URL: its secrets masked, TLS spelled the Redis way.

``backend_url`` may carry a password (``redis://:PASSWORD@host``, an ACL
user's ``redis://USER:PASSWORD@host`` or ``?sentinel_password=``). Nothing
mlaccel logs or prints shows it: :func:`mask` hides it in the URL and
:func:`redact` in any text, such as an exception's message.
"""

import functools
from importlib import metadata
import re
import urllib.parse

MASK = '***'

# Query options whose value is a secret.
_SECRET_OPTION = re.compile(r'pass|secret|token|auth|credential', re.I)
# Last resort for a URL urllib cannot split: hide the userinfo.
_USERINFO = re.compile(r'(//)[^/@?#]*@')


class BackendError(ValueError):
    """The URL names no backend this installation has."""


def _split(url):
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # raises ValueError on a malformed port
        return parts
    except ValueError:
        return None


def secrets(url):
    """The secret parts of ``url``, as written and percent-decoded."""
    parts = _split(url)
    found = set()
    if parts is None:
        match = _USERINFO.search(url or '')
        if match:
            user, colon, password = match.group(0)[2:-1].partition(':')
            if colon:
                found.update((user + colon + password, password))
    else:
        if parts.password:
            found.add(parts.password)
            found.add(urllib.parse.unquote(parts.password))
        for key, value in urllib.parse.parse_qsl(parts.query,
                                                 keep_blank_values=True):
            if _SECRET_OPTION.search(key) and value:
                found.add(value)
                found.add(urllib.parse.quote(value, safe=''))
    found.discard('')
    return sorted(found, key=len, reverse=True)


def mask(url):
    """``url`` with every password and secret option shown as ``***``."""
    if not url:
        return url
    parts = _split(url)
    if parts is None:
        return _USERINFO.sub(r'\1%s@' % MASK, url)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition('@')
        netloc = '%s:%s@%s' % (user.partition(':')[0], MASK, host)
    query = '&'.join(
        '%s=%s' % (key, MASK if _SECRET_OPTION.search(key) else value)
        for key, value in (
            pair.partition('=')[::2] for pair in parts.query.split('&')
            if pair)) if parts.query else ''
    return urllib.parse.urlunsplit(
        (parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(text, url):
    """``text`` with the URL masked and each of its secrets replaced."""
    text = str(text)
    if not url:
        return text
    text = text.replace(url, mask(url))
    for secret in secrets(url):
        text = text.replace(secret, MASK)
    return text


@functools.lru_cache(maxsize=1)
def known_schemes():
    """Backend schemes tooz can load here, plus ``rediss``."""
    names = {ep.name for ep in metadata.entry_points(group='tooz.backends')}
    if 'redis' in names:
        names.add('rediss')
    return frozenset(names)


def tooz_url(url):
    """The URL to hand tooz for ``url``.

    ``rediss://`` (Redis over TLS, as Redis clients write it) becomes
    ``redis://...?ssl=true``, which is how tooz asks for TLS.

    :raises BackendError: for a scheme no installed tooz driver handles.
    """
    parts = _split(url)
    scheme = parts.scheme if parts is not None else ''
    if scheme not in known_schemes():
        raise BackendError(
            'state bus URL %s: unknown backend %r; known here: %s'
            % (mask(url), scheme, ', '.join(sorted(known_schemes()))))
    if scheme == 'rediss':
        query = parts.query
        if 'ssl=' not in query:
            query = '&'.join(filter(None, [query, 'ssl=true']))
        return urllib.parse.urlunsplit(
            ('redis', parts.netloc, parts.path, query, parts.fragment))
    return url


def with_defaults(url, **options):
    """``url`` with each of ``options`` added unless it sets it already."""
    parts = _split(url)
    if parts is None or not options:
        return url
    held = {key for key, _ in urllib.parse.parse_qsl(
        parts.query, keep_blank_values=True)}
    added = urllib.parse.urlencode(
        [(key, value) for key, value in sorted(options.items())
         if key not in held])
    query = '&'.join(filter(None, [parts.query, added]))
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def file_dir(url):
    """The directory of a ``file://`` bus, or ``None`` for other schemes."""
    parts = _split(url)
    if parts is None or parts.scheme != 'file':
        return None
    return parts.path
