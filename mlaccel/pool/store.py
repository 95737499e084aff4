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

"""Pool state: members, their credentials, claims and costs.

One JSON file per pool in a directory private to the user the launcher and
the pool manager run as (0700; files 0600): each member's token and pinned
certificate are known there and inside that member only, never on the
state bus or in server metadata. Every change happens in a
:meth:`PoolStore.transaction`, which holds the pool's lock on the state bus
(so launchers and managers on several hosts sharing the directory, and
threads of one process, see one order of claims) and replaces the file
atomically. A bus that cannot be reached raises :class:`PoolUnavailable`:
the caller creates fresh VMs instead, and nothing is claimed.
"""

import collections
import contextlib
import json
import os
import stat
import tempfile
import threading
import uuid

from oslo_log import log as logging

from mlaccel.pool import spec as pool_spec
from mlaccel import statebus

LOG = logging.getLogger(__name__)

IDLE = 'idle'
CLAIMED = 'claimed'
_SUFFIX = '.json'
_LOCAL_LOCKS = collections.defaultdict(threading.Lock)
_LOCAL_GUARD = threading.Lock()


class PoolUnavailable(Exception):
    """The pool's lock cannot be taken (the state bus is down)."""


class NoSuchPool(KeyError):
    """No pool with that key."""


def new_state(spec, min_size, max_size, max_tasks):
    """The state of a new, empty pool."""
    check_bounds(min_size, max_size, max_tasks)
    return {'spec': spec.to_dict(), 'key': spec.key,
            'bounds': {'min': min_size, 'max': max_size},
            'max_tasks': max_tasks, 'members': {},
            'stats': {'idle_vm_s': 0.0, 'tasks_served': 0, 'claimed': 0,
                      'asked': 0, 'created': 0, 'deleted': 0,
                      'create_failures': 0, 'failed_rounds': 0,
                      'capacity_until': None,
                      'arrivals': [], 'lead_time_s': None}}


def check_bounds(min_size, max_size, max_tasks=1):
    for name, value in (('min', min_size), ('max', max_size),
                        ('max_tasks', max_tasks)):
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 0:
            raise ValueError('%s must be an integer >= 0, got %r'
                             % (name, value))
    if max_size < min_size:
        raise ValueError('max (%d) must be at least min (%d)'
                         % (max_size, min_size))
    if max_tasks < 1:
        raise ValueError('max_tasks must be at least 1')


def spec_of(state):
    return pool_spec.PoolSpec.from_dict(state['spec'])


def members(state, wanted=None):
    """Members of ``state``, oldest first, in state ``wanted`` if given."""
    found = sorted(state['members'].values(),
                   key=lambda m: (m['ready_at'] or 0, m['server_id']))
    return [m for m in found if wanted is None or m['state'] == wanted]


def end_idle(state, member, now):
    """Count the member's idle time since it became idle, once."""
    since = member.get('idle_since')
    if since is not None:
        state['stats']['idle_vm_s'] += max(0.0, now - since)
        member['idle_since'] = None


class PoolStore:
    """The pools in ``directory``.

    :param lock: ``callable(name) -> tooz lock`` (see :func:`bus_locks`);
        ``None`` means this process alone uses the directory (tests, a
        single node without a bus).
    :param lock_timeout: seconds to wait for a pool's lock.
    """

    def __init__(self, directory, lock=None, lock_timeout=10.0):
        self.directory = os.path.abspath(directory)
        self.lock = lock
        self.lock_timeout = lock_timeout

    def ensure(self):
        """Make the store's private directory if it is missing.

        Launchers record demand only into a store that exists
        (:func:`mlaccel.pool.cli.claimer`).
        """
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        mode = os.stat(self.directory).st_mode
        if stat.S_IMODE(mode) & 0o077:
            raise PermissionError(
                'pool state directory %s is mode %o; it holds credentials '
                'and must be private (0700)'
                % (self.directory, stat.S_IMODE(mode)))

    def _path(self, key, suffix=_SUFFIX):
        if not key.isalnum():
            raise ValueError('bad pool key %r' % key)
        return os.path.join(self.directory, key + suffix)

    def keys(self):
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(n[:-len(_SUFFIX)] for n in names
                      if n.endswith(_SUFFIX) and n[:-len(_SUFFIX)].isalnum())

    def read(self, key, suffix=_SUFFIX):
        """The pool's state as last written (no lock: for display)."""
        try:
            with open(self._path(key, suffix)) as stream:
                return json.load(stream)
        except FileNotFoundError:
            raise NoSuchPool(key)

    def exists(self, key):
        return os.path.exists(self._path(key))

    def _write(self, key, state, suffix=_SUFFIX):
        self.ensure()
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix='.tmp-')
        try:
            with os.fdopen(fd, 'w') as stream:
                json.dump(state, stream, sort_keys=True)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(tmp, self._path(key, suffix))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _locked(self, key):
        with _LOCAL_GUARD:
            local = _LOCAL_LOCKS[(self.directory, key)]
        if not local.acquire(timeout=self.lock_timeout):
            raise PoolUnavailable('pool %s is busy' % key)
        try:
            if self.lock is None:
                yield
                return
            lock = self._bus_lock(key)
            try:
                yield
            finally:
                with contextlib.suppress(Exception):
                    lock.release()
        finally:
            local.release()

    def _bus_lock(self, key):
        """The pool's lock on the bus, held, within ``lock_timeout``.

        Reaching a bus that is down can take far longer than that (a Redis
        client retries its connection for about a minute), so the attempt
        runs in a thread of its own; one given up on releases the lock if
        it gets it after all.
        """
        attempt = _BusAttempt(self.lock, 'mlaccel-pool-' + key,
                              self.lock_timeout)
        outcome = attempt.wait()
        if isinstance(outcome, Exception):
            raise PoolUnavailable('cannot lock pool %s on the state bus: %s'
                                  % (key, outcome))
        if outcome is None:
            raise PoolUnavailable('pool %s stayed locked, or the state bus '
                                  'did not answer, for %.0f s'
                                  % (key, self.lock_timeout))
        return outcome

    @contextlib.contextmanager
    def transaction(self, key, create=None, suffix=_SUFFIX):
        """Hold the pool's lock; yield its state; write it back at the end.

        ``create`` is the state to start from if the pool does not exist
        (else :class:`NoSuchPool`). An exception inside writes nothing.
        ``suffix`` names another kind of document kept the same way beside
        the pools (see :mod:`mlaccel.pool.demand`); only ``.json`` files
        are pools.
        """
        # A pool's lock is named by its key alone, as ever.
        with self._locked(key if suffix == _SUFFIX else key + suffix):
            try:
                state = self.read(key, suffix)
            except NoSuchPool:
                if create is None:
                    raise
                state = create
            yield state
            self._write(key, state, suffix)

    def delete(self, key):
        """Remove an empty pool's file."""
        with self._locked(key):
            state = self.read(key)
            if state['members']:
                raise ValueError('pool %s still has %d members; set its '
                                 'bounds to 0 first'
                                 % (key, len(state['members'])))
            os.unlink(self._path(key))


class _BusAttempt:
    """One attempt to take a bus lock, waited for at most ``timeout``."""

    def __init__(self, locks, name, timeout):
        self._locks = locks
        self._name = name
        self._timeout = timeout
        self._guard = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self._outcome = None

    def wait(self):
        """The held lock, the exception raised, or ``None`` (timed out)."""
        threading.Thread(target=self._run, daemon=True,
                         name='mlaccel-pool-bus-lock').start()
        self._done.wait(self._timeout)
        with self._guard:
            if not self._done.is_set():
                self._abandoned = True
            return self._outcome

    def _run(self):
        lock = None
        try:
            lock = self._locks(self._name)
            outcome = lock if lock.acquire(blocking=self._timeout) else None
        except Exception as exc:
            outcome = exc
        with self._guard:
            self._outcome = outcome
            self._done.set()
            late = self._abandoned
        if late and outcome is lock and lock is not None:
            with contextlib.suppress(Exception):
                lock.release()


class BusLocks:
    """Pool locks on the configured state bus; one tooz client, lazily.

    A client that cannot start raises when a lock is asked for (the caller
    turns that into :class:`PoolUnavailable`) and is tried again next time.
    No lock is held while a client connects, so :meth:`stop` never waits
    for a bus that does not answer.

    A lock held by a process that died is free again after ``[mlaccel_pool]
    leader_lease`` seconds (tooz's ``lock_timeout`` of this client, unless
    the bus URL sets one): the bound on a pool manager's failover.
    """

    def __init__(self, conf):
        self.conf = conf
        self._coord = None
        self._stopped = False
        self._guard = threading.Lock()

    def __call__(self, name):
        return self._client().get_lock(name.encode())

    def _client(self):
        with self._guard:
            if self._coord is not None:
                return self._coord
        coord = statebus.coordinator(
            self.conf, 'mlaccel-pool-%s' % uuid.uuid4().hex,
            defaults={'lock_timeout': self.conf.mlaccel_pool.leader_lease})
        try:
            statebus.start(coord, start_heart=True)
        except Exception as exc:
            raise PoolUnavailable(statebus.redact(self.conf, exc))
        with self._guard:
            if self._coord is None and not self._stopped:
                self._coord = coord
                return coord
            current, stopped = self._coord, self._stopped
        # Another thread's client won the race, or stop() came first.
        self._stop(coord)
        if stopped:
            raise PoolUnavailable('the pool locks were stopped')
        return current

    def _stop(self, coord):
        statebus.stop_quietly(coord,
                              url=self.conf.mlaccel_statebus.backend_url)

    def stop(self):
        with self._guard:
            coord, self._coord = self._coord, None
            self._stopped = True
        if coord is not None:
            self._stop(coord)
