# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""A reader-preferring lock for Nova's ``CellDatabases`` test fixture.

On native threads Nova's harness takes two kinds of lock: ``CellDatabases``
guards its choice of cell database with a reader/writer lock that prefers
writers, and ``DatabaseWriteLock`` serialises writer transactions per
database with a re-entrant lock. A thread inside a writer transaction that
asks for the cell lock to read waits behind any writer queued for it; the
writer waits for the readers in a ``target_cell`` block; those wait for the
transaction's database lock: a deadlock, seen when servers are created,
listed and deleted at once (the ready pool's refill and reconcile). With
readers preferred a reader waits only while a writer holds the lock, which
a writer does just long enough to switch the cell, so the cycle cannot
close. Exclusion is unchanged; only who goes first.
"""

import contextlib
import importlib
import threading


class ReaderPreferringLock:
    """Many readers or one writer; a writer waiting holds back no reader.

    Re-entrant: a reader may read again, a writer may write or read again.
    A reader may not become a writer (as with Nova's own lock).
    """

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = {}          # thread ident -> depth
        self._writer = None
        self._writes = 0

    @contextlib.contextmanager
    def read_lock(self):
        me = threading.get_ident()
        with self._cond:
            self._cond.wait_for(lambda: self._writer in (None, me))
            self._readers[me] = self._readers.get(me, 0) + 1
        try:
            yield self
        finally:
            with self._cond:
                self._readers[me] -= 1
                if not self._readers[me]:
                    del self._readers[me]
                self._cond.notify_all()

    @contextlib.contextmanager
    def write_lock(self):
        me = threading.get_ident()
        with self._cond:
            if self._writer != me:
                if me in self._readers:
                    raise RuntimeError('a reader cannot become a writer')
                self._cond.wait_for(
                    lambda: self._writer is None and not self._readers)
                self._writer = me
            self._writes += 1
        try:
            yield self
        finally:
            with self._cond:
                self._writes -= 1
                if not self._writes:
                    self._writer = None
                self._cond.notify_all()


def install():
    """On native threads, have ``CellDatabases`` fixtures use it.

    Under eventlet Nova's harness has no ``DatabaseWriteLock``, and its own
    lock stays.
    """
    from nova import utils
    if utils.concurrency_mode_threading():
        fixtures = importlib.import_module('nova.tests.fixtures.nova')
        fixtures.ReaderWriterLock = ReaderPreferringLock
