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

"""The state bus: host reports carried over a tooz coordination backend.

Agents publish (:mod:`mlaccel.statebus.publisher`); the scheduler plugins
read every host's report from an in-memory cache that a background thread
refreshes (:mod:`mlaccel.statebus.reader`). Reports are signed with per-host
keys (:mod:`mlaccel.statebus.keys`, :mod:`mlaccel.statebus.signing`).
"""

import base64
import errno
import os
import threading

from oslo_log import log as logging
import tooz
from tooz import coordination

from mlaccel.statebus import drivers
from mlaccel.statebus import url as bus_url

LOG = logging.getLogger(__name__)

# What the tooz file driver keeps in its directory once a member joined.
_FILE_BUS_ENTRIES = ('groups', 'tmp', '.driver_lock')


class NoBus(Exception):
    """A read-only client found no bus to read (nothing was created)."""


#: Seconds a shutdown waits for a tooz client to stop. A client of an
#: unreachable Redis retries for about a minute before giving up.
STOP_TIMEOUT = 5.0


def coordinator(conf, member_id, read_only=False, defaults=None):
    """Return a tooz coordinator for the configured bus, not yet started.

    A file bus's directory is created mode 0700 if it is missing, unless
    ``read_only``: then nothing is created on disk, and :class:`NoBus` is
    raised if no member ever joined there.

    :param defaults: tooz options (e.g. ``lock_timeout``) for this client,
        each unless the operator's URL sets it.

    :raises mlaccel.statebus.url.BackendError: for an unknown scheme.
    """
    url = conf.mlaccel_statebus.backend_url
    tooz_url = bus_url.with_defaults(bus_url.tooz_url(url),
                                     **(defaults or {}))
    path = bus_url.file_dir(url)
    if path is not None:
        if read_only:
            _check_readable(path)
            if not all(os.path.exists(os.path.join(path, entry))
                       for entry in _FILE_BUS_ENTRIES):
                raise NoBus('no state bus in %s yet' % path)
        elif not os.path.isdir(path):
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)
    return coordination.get_coordinator(
        tooz_url,
        member_id.encode() if isinstance(member_id, str) else member_id)


def start(coord, start_heart=False):
    """Start ``coord``; a bus that refuses it fails now, not in a minute.

    :raises tooz.coordination.ToozConnectionError: the backend refused the
        client (:func:`mlaccel.statebus.drivers.check`), or what tooz's
        start raises.
    """
    drivers.check(coord)
    coord.start(start_heart=start_heart)


def _check_readable(path):
    """Raise OSError if ``path`` exists but cannot be read as a directory."""
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR),
                                 path)
    if not os.access(path, os.R_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)


def still_owner(lock):
    """Whether ``lock``, taken earlier, is still held by its taker.

    tooz 9.1's etcd3gw lock has no ``is_still_owner``, and once its lease
    has expired (its taker cut off from etcd for longer than the lock's
    timeout) and another client took the lock, its taker's ``acquired`` and
    ``heartbeat()`` still say true (seen on etcd 3.4). For that lock the
    lock's key is read and compared with what its taker wrote, as tooz
    does for the locks that have the check.
    """
    try:
        return lock.is_still_owner()
    except tooz.NotImplemented:
        if type(lock).__module__ != 'tooz.drivers.etcd3gw':
            raise
    held = lock._coord.client.get(lock._key.decode())
    return base64.b64decode(lock._uuid) in held


def group_id(conf):
    return conf.mlaccel_statebus.group.encode()


def safe_url(conf):
    """The configured bus URL with its secrets masked, for messages."""
    return bus_url.mask(conf.mlaccel_statebus.backend_url)


def redact(conf, text):
    """``text`` (e.g. an exception) without the bus URL's secrets."""
    return bus_url.redact(text, conf.mlaccel_statebus.backend_url)


def stop_quietly(coord, leave=None, timeout=STOP_TIMEOUT, url=None):
    """Stop a tooz client without letting a dead backend block the caller.

    :param leave: a group to leave first, if any.
    :param url: the bus URL, whose secrets are kept out of log lines.

    The work runs in a daemon thread; after ``timeout`` seconds the caller
    goes on and the thread finishes (or dies with the process) on its own.
    """
    def _stop():
        try:
            if leave is not None:
                coord.leave_group(leave).get()
        except Exception as exc:
            LOG.warning('Could not leave the state bus group: %s',
                        bus_url.redact(exc, url))
        try:
            coord.stop()
        except Exception as exc:
            LOG.debug('Ignored error stopping a state bus client: %s',
                      bus_url.redact(exc, url))

    thread = threading.Thread(target=_stop, name='mlaccel-statebus-stop',
                              daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        LOG.warning('State bus client still stopping after %.0f s; going on '
                    'without waiting for it.', timeout)
