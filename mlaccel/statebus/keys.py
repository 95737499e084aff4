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

Both files are text: the deployment secret as written (at least
:data:`MIN_SECRET_CHARS` characters; :func:`generate` makes 64 hex digits),
a host key as 64 hex digits. Neither may be accessible to other users.
"""

import hashlib
import hmac
import os
import secrets
import stat

MIN_SECRET_CHARS = 32
HOST_KEY_BYTES = 32
_HOST_LABEL = b'mlaccel-host:'


class KeyFileError(Exception):
    """A key file is missing, unsafe or not a key."""


def generate():
    """A new deployment secret, as the text to store."""
    return secrets.token_hex(32)


def derive(secret, host):
    """The key of ``host``: 32 bytes derived from the deployment secret.

    :param secret: the deployment secret as bytes.
    """
    return hmac.new(secret, _HOST_LABEL + host.encode('utf-8'),
                    hashlib.sha256).digest()


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
        data = f.read(4097)
    try:
        text = data.decode('ascii').strip()
    except UnicodeDecodeError:
        raise KeyFileError('%s %s is not ASCII text' % (what, path))
    if len(data) > 4096:
        raise KeyFileError('%s %s is too large to be a key' % (what, path))
    return text


def read_deployment_key(path):
    """The deployment secret (bytes) in ``path``.

    :raises KeyFileError: with the reason.
    """
    text = _read(path, 'deployment key file')
    if len(text) < MIN_SECRET_CHARS:
        raise KeyFileError(
            'deployment key file %s holds %d characters, fewer than the %d '
            'required; make one with "mlaccel-statebus keygen"'
            % (path, len(text), MIN_SECRET_CHARS))
    return text.encode('ascii')


def read_host_key(path):
    """The host key (bytes) in ``path``.

    :raises KeyFileError: with the reason.
    """
    text = _read(path, 'host key file')
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b''
    if len(key) != HOST_KEY_BYTES:
        raise KeyFileError(
            'host key file %s does not hold %d hex digits; make one with '
            '"mlaccel-statebus derive"' % (path, 2 * HOST_KEY_BYTES))
    return key


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


def provision(deployment_key_file, host_key_files):
    """Make a deployment secret if there is none, and hosts' keys from it.

    For test clouds and installers: an existing deployment secret is kept;
    a host key file is (re)written, atomically and 0600, unless it already
    holds the right key.

    :param host_key_files: ``{host: path}``.
    """
    if not os.path.exists(deployment_key_file):
        write_key(deployment_key_file, generate())
    secret = read_deployment_key(deployment_key_file)
    for host, path in host_key_files.items():
        text = derive(secret, host).hex()
        try:
            if read_host_key(path).hex() == text:
                continue
        except KeyFileError:
            pass
        tmp = '%s.tmp-%d' % (path, os.getpid())
        if os.path.exists(tmp):
            os.unlink(tmp)
        write_key(tmp, text)
        os.replace(tmp, path)
