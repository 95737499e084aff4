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

"""The node's image cache, read from Nova's own layout.

nova-compute keeps one file per image in ``$instances_path/_base`` named
by the SHA-1 of the image id (``nova.virt.libvirt.imagecache.
get_cache_fname``); resized copies, swap and ephemeral disks share the
directory under other names. Nothing here writes an index: the directory
is the truth, and a SHA-1 is mapped back to its image id through the ids
the agent learns (hot images, Glance, builds it saw).

A scan lists the directory and stats its entries, no file contents; a
change in the set of images or their sizes bumps :attr:`ImageCache.
generation`, which the reporter publishes.
"""

import hashlib
import os
import re
import shutil
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

_CACHE_NAME = re.compile(r'[0-9a-f]{40}')
#: Prefix of the agent's temporary files in the cache directory.
TEMP_PREFIX = '.mlaccel-'


def cache_name(image_id):
    """The file name nova-compute gives image ``image_id`` in the cache."""
    return hashlib.sha1(image_id.encode('utf-8')).hexdigest()


class ImageCache:
    """What is in one image cache directory; thread-safe.

    :param path: the cache directory (``NovaSettings.cache_dir``).
    :param headroom: bytes of the file system pre-fetching leaves free.
    """

    def __init__(self, path, headroom=0):
        self.path = path
        self.headroom = headroom
        self._lock = threading.Lock()
        self._sizes = {}        # cache name -> bytes
        self._ids = {}          # cache name -> image id
        self._free = 0
        self._generation = 0

    @property
    def generation(self):
        """Bumped whenever a scan or a new id mapping changes the images."""
        return self._generation

    def learn(self, image_ids):
        """Remember the cache names of ``image_ids``; returns new ones."""
        added = []
        with self._lock:
            for image_id in image_ids:
                name = cache_name(image_id)
                if self._ids.get(name) != image_id:
                    self._ids[name] = image_id
                    added.append(image_id)
                    if name in self._sizes:
                        self._generation += 1
        return added

    def scan(self):
        """Read the directory again; returns whether the images changed.

        A missing directory is an empty cache (nova-compute creates it on
        its first download).
        """
        sizes = {}
        try:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    if not _CACHE_NAME.fullmatch(entry.name):
                        continue
                    try:
                        if entry.is_file():
                            sizes[entry.name] = entry.stat().st_size
                    except FileNotFoundError:
                        pass  # removed while we looked
        except FileNotFoundError:
            pass
        free = _free_bytes(self.path)
        with self._lock:
            changed = sizes != self._sizes
            self._sizes = sizes
            self._free = free
            if changed:
                self._generation += 1
        return changed

    def has(self, image_id):
        with self._lock:
            return cache_name(image_id) in self._sizes

    def image_ids(self):
        """Ids of the cached images whose id is known."""
        with self._lock:
            return frozenset(self._ids[name] for name in self._sizes
                             if name in self._ids)

    def unknown_names(self):
        """Cache names no known image id maps to."""
        with self._lock:
            return frozenset(name for name in self._sizes
                             if name not in self._ids)

    def size_of(self, image_id):
        with self._lock:
            return self._sizes.get(cache_name(image_id))

    @property
    def used_bytes(self):
        with self._lock:
            return sum(self._sizes.values())

    @property
    def free_bytes(self):
        """Free bytes of the cache's file system at the last scan."""
        return self._free

    def room(self):
        """Bytes pre-fetching may still fill (free minus the headroom)."""
        return max(0, self._free - self.headroom)

    def remove_temporaries(self):
        """Delete the agent's temporary files (left by a killed agent).

        Returns their names. Safe while nova-compute runs: it never uses
        this prefix.
        """
        removed = []
        try:
            entries = os.listdir(self.path)
        except FileNotFoundError:
            return removed
        for name in entries:
            if name.startswith(TEMP_PREFIX):
                try:
                    os.unlink(os.path.join(self.path, name))
                    removed.append(name)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    LOG.warning('Cannot remove the temporary file %s of an '
                                'earlier run: %s', name, exc)
        if removed:
            LOG.info('Removed %d temporary file(s) left in the image cache '
                     'by an earlier run: %s', len(removed),
                     ', '.join(sorted(removed)))
        return removed


def _free_bytes(path):
    """Free bytes of the file system ``path`` is or will be on."""
    while True:
        try:
            return shutil.disk_usage(path).free
        except FileNotFoundError:
            parent = os.path.dirname(path)
            if parent == path:
                raise
            path = parent
