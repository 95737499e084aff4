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

"""The keys that sign host reports.

Readers hold the deployment secret; each host's key is derived from it,
``HMAC-SHA256(secret, "mlaccel-host:" + host)``, and a publisher holds only
its own, so a compromised compute node can sign for itself and no other.

Both files are text, one key a line, the current key first; blank lines
and lines starting with ``#`` are ignored. Every key has an id, so that two
keys can be valid while they are rotated:

* deployment key file: ``KEY-ID SECRET`` (the secret at least
  :data:`MIN_SECRET_CHARS` characters; :func:`generate` makes 64 hex
  digits). A line of a secret alone, as mlaccel wrote it before key ids,
  has the id :func:`key_id` of the secret.
* host key file: ``KEY-ID HOST KEY`` (the key 64 hex digits; the id is the
  deployment key's it was derived from). A line of a key alone, as written
  before key ids, is a key of whichever host uses it, with the id
  :data:`UNNAMED`.

Neither file may be accessible to other users.
"""

import collections
import hashlib
import hmac
import os
import re
import secrets
import stat

MIN_SECRET_CHARS = 32
HOST_KEY_BYTES = 32
#: The id of a host key written without one: readers try each of theirs.
UNNAMED = '-'
_HOST_LABEL = b'mlaccel-host:'
_ID_LABEL = b'mlaccel-key-id'
_ID_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,31}')

#: A deployment key: its id (str) and secret (bytes).
DeploymentKey = collections.namedtuple('DeploymentKey', 'id secret')
#: A host key: its id, the host it signs for (``None``: any) and the key.
HostKey = collections.namedtuple('HostKey', 'id host key')


class KeyFileError(Exception):
    """A key file is missing, unsafe or not a key."""


def key_id(secret):
    """The default id of a deployment secret (bytes): 8 hex digits."""
    return hmac.new(secret, _ID_LABEL, hashlib.sha256).hexdigest()[:8]


def generate():
    """A new deployment key, as the line to store."""
    secret = secrets.token_hex(32)
    return '%s %s' % (key_id(secret.encode('ascii')), secret)


def derive(secret, host):
    """The key of ``host``: 32 bytes derived from the deployment secret.

    :param secret: the deployment secret as bytes.
    """
    return hmac.new(secret, _HOST_LABEL + host.encode('utf-8'),
                    hashlib.sha256).digest()


def derive_all(deployment_keys, hosts):
    """The :class:`HostKey` list of ``hosts``, each host's current first."""
    return [HostKey(k.id, host, derive(k.secret, host))
            for host in hosts for k in deployment_keys]


def _read(path, what):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0))
    except OSError as exc:
        raise KeyFileError('%s %s cannot be read: %s'
                           % (what, path, exc.strerror))
    with os.fdopen(fd, 'rb') as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise KeyFileError('%s %s is not a regular file' % (what, path))
        if mode & (stat.S_IRWXO | stat.S_IWGRP | stat.S_IXGRP):
            raise KeyFileError(
                '%s %s is accessible to other users (mode %04o); make it '
                '0600 or 0640' % (what, path, stat.S_IMODE(mode)))
        data = f.read(65537)
    try:
        text = data.decode('ascii')
    except UnicodeDecodeError:
        raise KeyFileError('%s %s is not ASCII text' % (what, path))
    if len(data) > 65536:
        raise KeyFileError('%s %s is too large to be a key' % (what, path))
    lines = [line.split() for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith('#')]
    if not lines:
        raise KeyFileError('%s %s holds no key' % (what, path))
    return lines


def _check_ids(path, ids):
    for kid in ids:
        if kid != UNNAMED and not _ID_RE.fullmatch(kid):
            raise KeyFileError('key file %s: %r is not a key id (letters, '
                               'digits, ".", "_", "-"; at most 32)'
                               % (path, kid))


def read_deployment_keys(path):
    """The :class:`DeploymentKey` list in ``path``, the current one first.

    :raises KeyFileError: with the reason.
    """
    found = []
    for fields in _read(path, 'deployment key file'):
        secret = fields[-1].encode('ascii')
        if len(fields) > 2 or len(secret) < MIN_SECRET_CHARS:
            raise KeyFileError(
                'deployment key file %s: every line must be "KEY-ID '
                'SECRET" with a secret of at least %d characters; make one '
                'with "mlaccel-statebus keygen"' % (path, MIN_SECRET_CHARS))
        found.append(DeploymentKey(
            fields[0] if len(fields) == 2 else key_id(secret), secret))
    ids = [k.id for k in found]
    _check_ids(path, ids)
    if len(set(ids)) != len(ids):
        raise KeyFileError('deployment key file %s names a key id twice'
                           % path)
    return found


def read_host_keys(path):
    """The :class:`HostKey` list in ``path``, in the file's order.

    :raises KeyFileError: with the reason.
    """
    found = []
    for fields in _read(path, 'host key file'):
        try:
            key = bytes.fromhex(fields[-1])
        except ValueError:
            key = b''
        if len(fields) not in (1, 3) or len(key) != HOST_KEY_BYTES:
            raise KeyFileError(
                'host key file %s: every line must be "KEY-ID HOST KEY" '
                'with a key of %d hex digits; make one with '
                '"mlaccel-statebus derive"' % (path, 2 * HOST_KEY_BYTES))
        found.append(HostKey(fields[0], fields[1], key) if len(fields) == 3
                     else HostKey(UNNAMED, None, key))
    _check_ids(path, [k.id for k in found])
    return found


def format_deployment_keys(deployment_keys):
    return '\n'.join('%s %s' % (k.id, k.secret.decode('ascii'))
                     for k in deployment_keys)


def format_host_keys(host_keys):
    return '\n'.join('%s %s %s' % (k.id, k.host, k.key.hex())
                     for k in host_keys)


def write_key(path, text):
    """Write ``text`` to a new file ``path``, mode 0600.

    :raises KeyFileError: if the file exists (a key is never overwritten)
        or cannot be written; nothing is left behind.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyFileError('%s exists; keys are never overwritten, remove '
                           'it first' % path)
    except OSError as exc:
        raise KeyFileError('%s cannot be created: %s' % (path, exc.strerror))
    try:
        with os.fdopen(fd, 'w') as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(text + '\n')
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        os.unlink(path)
        raise KeyFileError('%s cannot be written: %s' % (path, exc.strerror))


def replace_key(path, text):
    """Replace ``path`` by a file holding ``text``, atomically, 0600."""
    tmp = '%s.tmp-%d' % (path, os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    write_key(tmp, text)
    os.replace(tmp, path)


def rotate(path):
    """Put a new key first in deployment key file ``path``.

    The current key stays, second, so that hosts still signing with it are
    accepted until they have their new keys; older ones are dropped.

    :returns: ``(new key id, [ids of the keys dropped])``.
    """
    old = read_deployment_keys(path)
    fields = generate().split()
    new = DeploymentKey(fields[0], fields[1].encode('ascii'))
    replace_key(path, format_deployment_keys([new, old[0]]))
    return new.id, [k.id for k in old[1:]]


def provision(deployment_key_file, host_key_files):
    """Make a deployment key if there is none, and hosts' keys from it.

    For test clouds and installers: an existing deployment key is kept; a
    host key file is (re)written, atomically and 0600, unless it already
    holds the right keys.

    :param host_key_files: ``{path: [host, ...]}``.
    """
    if not os.path.exists(deployment_key_file):
        write_key(deployment_key_file, generate())
    deployment_keys = read_deployment_keys(deployment_key_file)
    for path, hosts in host_key_files.items():
        wanted = derive_all(deployment_keys, hosts)
        try:
            if read_host_keys(path) == wanted:
                continue
        except KeyFileError:
            pass
        replace_key(path, format_host_keys(wanted))
