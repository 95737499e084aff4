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

"""A directory: a member's write or leave changes the group's directory.

tooz's file driver writes a member's report by leaving and joining again,
which removes and creates its file, so the directory's modification time
moves. A refresh stats the directory and reads every report only when it
moved. A time stamp less than a second old at the last read is not
trusted (a file system's clock ticks coarsely, and a report being
written then may have been read half-written): the next refresh reads
everything again.
"""

import os
import time

from mlaccel.statebus.drivers import base

#: A directory time stamp younger than this (seconds) is not trusted.
SETTLE_SECONDS = 1.0


class FileChanges(base.Changes):
    """One group's changes by the time stamp of its directory."""

    def __init__(self, coord, group):
        super().__init__(coord, group)
        self._path = os.path.join(coord._group_dir,
                                  coord._make_filesystem_safe(group))
        self._seen = None

    def _stamp(self):
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    def read_all(self):
        stamp = self._stamp()
        members = super().read_all()
        settled = stamp is not None and \
            time.time_ns() - stamp[1] > SETTLE_SECONDS * 1e9
        self._seen = stamp if settled else None
        return members

    def read_changed(self):
        if self._seen is None or self._stamp() != self._seen:
            return None
        return {}
