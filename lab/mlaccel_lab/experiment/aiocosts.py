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

"""What a run on the all-in-one cloud cost, read where it happened.

The services' own log lines since a mark: each compute's test virt driver
logs ``Fetched image <id> (<n> bytes)`` for every download into its image
cache, each agent ``Pre-fetched image <id>: <n> bytes`` for every
pre-fetch, and the mirror-volume driver ``Volume <id> from image <id>
takes Cinder's normal path`` for every volume it did not clone, and
Cinder's own image-volume cache (its ``cinder.image.cache`` logger at
debug in the cloud's cinder.conf) ``ImageVolumeCache notification:
action=miss`` for every lookup that found no entry (which of them were
copies: :meth:`LogMark.cinder_cache_misses`). Golden
volumes (the internal tenant's, each one download of its image) are listed
from Cinder.
"""

import collections
import os
import re
import threading

from mlaccel.cinder import metadata as cinder_metadata
from mlaccel_lab.testing.aio import agents
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import procs

FETCHED = re.compile(r'Fetched image (?P<image>[0-9a-f-]{36}) '
                     r'\((?P<bytes>\d+) bytes\)')
PREFETCHED = re.compile(r'Pre-fetched image (?P<image>[0-9a-f-]{36}): '
                        r'(?P<bytes>\d+) bytes')
DEGRADED = re.compile(r'Volume (?P<volume>[0-9a-f-]{36}) from image '
                      r'(?P<image>[0-9a-f-]{36}) takes Cinder')

CACHE_MISS = re.compile(r"\[(?P<context>[^\]]*)\] ImageVolumeCache "
                        r"notification: action=miss "
                        r"data=\{'image_id': '(?P<image>[0-9a-f-]{36})'")


def compute_log(host):
    return 'nova-compute-' + host


class LogMark:
    """Offsets of the services' logs at a moment; reads what came after."""

    def __init__(self, lay):
        self.lay = lay
        self.offsets = {name: _size(procs.log_path(lay, name))
                        for name in self.names()}

    def names(self):
        hosts = self.lay.compute_hosts()
        return ([compute_log(h) for h in hosts]
                + [agents.service(h) for h in hosts] + ['cinder-volume'])

    def since(self, name):
        """The text ``name`` logged since the mark."""
        path = procs.log_path(self.lay, name)
        offset = self.offsets.get(name, 0)
        try:
            with open(path, 'rb') as f:
                if os.path.getsize(path) < offset:
                    offset = 0  # the log was replaced
                f.seek(offset)
                return f.read().decode('utf-8', 'replace')
        except FileNotFoundError:
            return ''

    def fetches(self):
        """``[(host, image id, bytes)]`` downloaded into image caches."""
        out = []
        for host in self.lay.compute_hosts():
            for name, pattern in ((compute_log(host), FETCHED),
                                  (agents.service(host), PREFETCHED)):
                out += [(host, m.group('image'), int(m.group('bytes')))
                        for m in pattern.finditer(self.since(name))]
        return out

    def fetched_by_compute(self):
        """``{(host, image id)}`` downloaded by nova-compute itself."""
        return {(host, m.group('image'))
                for host in self.lay.compute_hosts()
                for m in FETCHED.finditer(self.since(compute_log(host)))}

    def cinder_cache_misses(self):
        """``{image id: volumes}`` Cinder's image-volume cache copied.

        Cinder looks an image's entry up under a lock of the image, in the
        request's logging context: a miss there is a copy from Glance (a
        request waiting on the lock then finds the entry and clones it).
        The copy then looks the entry up twice more as Cinder's internal
        tenant, and logs those misses in its context: they are not copies.
        """
        return collections.Counter(
            m.group('image')
            for m in CACHE_MISS.finditer(self.since('cinder-volume'))
            if configs.CINDER_INTERNAL_PROJECT not in m.group('context'))

    def degraded_volumes(self):
        """Ids of volumes the mirror-volume driver did not clone."""
        return {m.group('volume')
                for m in DEGRADED.finditer(self.since('cinder-volume'))}


class CacheCopies:
    """Which volumes of a run Cinder's own image-volume cache copied.

    Cinder copies the image into a volume for each of its copies
    (:meth:`LogMark.cinder_cache_misses`: one for a burst of an image,
    again after an eviction) and clones the others from the entry.
    Volumes are taken in the order they are recorded: of launches of one
    image running together, the first recorded take its copies. The run's
    first volume of an image is a copy whatever the log says.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._seen = set()
        self._taken = collections.Counter()

    def copied(self, image_id, misses):
        """Whether the next volume of ``image_id`` recorded was a copy.

        :param misses: ``{image id: misses}`` logged so far in the run
            (:meth:`LogMark.cinder_cache_misses`).
        """
        with self._lock:
            first = image_id not in self._seen
            self._seen.add(image_id)
            if self._taken[image_id] < max(misses.get(image_id, 0),
                                           int(first)):
                self._taken[image_id] += 1
                return True
            return False


def golden_fills(conn):
    """``(count, bytes)`` of the golden volumes Cinder lists now."""
    count = size = 0
    for volume in conn.block_storage.volumes(
            details=True, all_projects=True,
            project_id=configs.CINDER_INTERNAL_PROJECT):
        meta = volume.metadata or {}
        if cinder_metadata.IMAGE_KEY in meta:
            count += 1
            size += int(meta.get(cinder_metadata.SIZE_KEY) or 0)
    return count, size


def _size(path):
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0
