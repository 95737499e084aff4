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

"""The cell lock the Nova harness gets on native threads, with real threads.

Each waits on events with a bound, so that a broken lock fails the test
instead of hanging it.
"""

import threading

import testtools

from tests.functional import cell_lock

WAIT = 30


class ReaderPreferringLockTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.lock = cell_lock.ReaderPreferringLock()

    def _in_thread(self, target):
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        self.addCleanup(thread.join, WAIT)
        return thread

    def _taken_in_thread(self, lock):
        """Take ``lock()`` in a new thread; the event set once it has."""
        taken = threading.Event()

        def take():
            with lock():
                taken.set()

        self._in_thread(take)
        return taken

    def test_a_waiting_writer_holds_back_no_reader(self):
        # The deadlock: a reader holds the lock, a writer queues, and a
        # thread that must read before the first reader can finish asks.
        reading, queued, wrote = (threading.Event() for _ in range(3))
        done = threading.Event()

        def first_reader():
            with self.lock.read_lock():
                reading.set()
                done.wait(WAIT)

        def writer():
            queued.set()
            with self.lock.write_lock():
                wrote.set()

        self._in_thread(first_reader)
        self.assertTrue(reading.wait(WAIT))
        self._in_thread(writer)
        self.assertTrue(queued.wait(WAIT))
        self.assertFalse(wrote.wait(0.2))       # excluded by the reader
        second = self._taken_in_thread(self.lock.read_lock)
        self.assertTrue(second.wait(WAIT))
        self.assertFalse(wrote.is_set())
        done.set()
        self.assertTrue(wrote.wait(WAIT))

    def test_a_writer_excludes_readers_until_it_is_done(self):
        writing, release = threading.Event(), threading.Event()

        def writer():
            with self.lock.write_lock():
                writing.set()
                release.wait(WAIT)

        self._in_thread(writer)
        self.assertTrue(writing.wait(WAIT))
        read = self._taken_in_thread(self.lock.read_lock)
        self.assertFalse(read.wait(0.2))
        release.set()
        self.assertTrue(read.wait(WAIT))

    def test_re_entrant_but_no_escalation(self):
        with self.lock.write_lock():
            with self.lock.write_lock():
                with self.lock.read_lock():
                    pass
        with self.lock.read_lock():
            with self.lock.read_lock():
                pass
            self.assertRaises(RuntimeError,
                              self.lock.write_lock().__enter__)
        # Free again: another thread may write.
        wrote = self._taken_in_thread(self.lock.write_lock)
        self.assertTrue(wrote.wait(WAIT))
