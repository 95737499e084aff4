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

"""The sequence numbers a publisher signs into its reports.

A number is the larger of the last one plus one and the clock in
milliseconds, so it grows with every report, even when the clock steps
back, and still moves forward from the clock when the state is lost. A
high-water mark :data:`RESERVE` ahead of the numbers handed out is kept in
a file (written to a temporary file, fsynced, renamed, the directory
fsynced), rewritten only when the numbers pass it: a restarted publisher
starts above every number its predecessor may have used.
"""

import os
import threading
import time
from urllib import parse

#: How far (in sequence numbers, i.e. milliseconds) the stored mark is
#: ahead of the numbers handed out: at most one write per 10 s.
RESERVE = 10000


class SequenceError(OSError):
    """The high-water mark cannot be read or kept."""


def path_of(state_dir, group, host):
    """The file of ``host``'s mark in ``group`` (str) under ``state_dir``."""
    return os.path.join(state_dir, 'sequence-%s-%s' % (
        parse.quote(group, safe=''), parse.quote(host, safe='')))


class Sequence:
    """The sequence numbers of one publisher; thread-safe.

    :param path: the file of the high-water mark; its directory is made
        mode 0700 if missing.
    :param clock: returns UNIX time (tests pass their own).
    """

    def __init__(self, path, clock=time.time):
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._last = self._mark = None

    def next(self):
        """The next number; raises :class:`SequenceError`."""
        with self._lock:
            if self._mark is None:
                self._last = self._mark = self._load()
            number = max(self._last + 1, int(self._clock() * 1000))
            if number > self._mark:
                self._store(number + RESERVE)
                self._mark = number + RESERVE
            self._last = number
            return number

    def _load(self):
        try:
            with open(self.path) as f:
                text = f.read(32)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise SequenceError('report sequence file %s cannot be read: %s'
                                % (self.path, exc.strerror))
        if not text.strip().isdigit():
            raise SequenceError(
                'report sequence file %s does not hold a number; remove it '
                'to start again from the clock' % self.path)
        return int(text)

    def _store(self, mark):
        directory = os.path.dirname(self.path)
        tmp = '%s.tmp-%d' % (self.path, os.getpid())
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, 'w') as f:
                f.write('%d\n' % mark)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise SequenceError('report sequence file %s cannot be written: '
                                '%s' % (self.path, exc.strerror or exc))
