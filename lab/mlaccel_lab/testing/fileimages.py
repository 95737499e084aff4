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

"""An in-process stand-in for Glance as Cinder's volume service sees it.

Cinder talks to Glance through an image service object (``show``,
``download``, ``get_location``); Glance itself does not run inside a
test process, so this one serves images from files and counts downloads.
Faults can be injected: a download that breaks after some bytes, a slow
download, a download held until the test opens a gate
(``threading.Event``), so concurrent requests overlap.
"""

import datetime
import hashlib
import os
import threading
import time
import uuid

from cinder import exception

CHUNK = 1024 * 1024


class DownloadBroken(IOError):
    """An injected fault: the connection to the image store broke."""


class FileImageService:
    def __init__(self, directory, owner):
        self.directory = directory
        self.owner = owner
        self.images = {}
        self.downloads = {}
        self.fail_after = {}
        self.chunk_delay = 0.0
        self.gate = None
        self.temp_images = None
        self._lock = threading.Lock()

    def add(self, data, image_id=None, properties=None, **meta):
        """Store ``data`` as a raw image; return its metadata."""
        return self.add_chunks([data], image_id, properties, **meta)

    def add_chunks(self, chunks, image_id=None, properties=None, **meta):
        """Store the concatenated ``chunks`` as a raw image."""
        image_id = image_id or str(uuid.uuid4())
        path = os.path.join(self.directory, image_id)
        md5 = hashlib.md5(usedforsecurity=False)
        sha = hashlib.sha512()
        size = 0
        with open(path, 'wb') as f:
            for chunk in chunks:
                f.write(chunk)
                md5.update(chunk)
                sha.update(chunk)
                size += len(chunk)
        self.images[image_id] = dict({
            'id': image_id, 'name': 'image-%s' % image_id[:8],
            'status': 'active', 'visibility': 'public', 'protected': False,
            'owner': self.owner, 'container_format': 'bare',
            'disk_format': 'raw', 'size': size,
            'virtual_size': size, 'min_disk': 0, 'min_ram': 0,
            'checksum': md5.hexdigest(), 'os_hash_algo': 'sha512',
            'os_hash_value': sha.hexdigest(),
            'created_at': _now(), 'updated_at': _now(),
            'deleted': False, 'deleted_at': None,
            'properties': dict(properties or {})}, **meta)
        self.downloads[image_id] = 0
        return dict(self.images[image_id])

    def replace(self, image_id, data):
        """New content for an image (a new checksum and updated_at)."""
        meta = self.images.pop(image_id)
        meta.pop('id')
        for k in ('size', 'virtual_size', 'checksum', 'os_hash_value',
                  'created_at', 'updated_at'):
            meta.pop(k)
        downloads = self.downloads[image_id]
        self.add_chunks([data], image_id=image_id, **meta)
        self.images[image_id]['updated_at'] += datetime.timedelta(seconds=1)
        self.downloads[image_id] = downloads

    def session(self):
        """A per-request view of this service.

        Cinder gets a new Glance client per call and keeps per-request
        state (``temp_images``) on it.
        """
        return _Session(self)

    def path(self, image_id):
        return os.path.join(self.directory, image_id)

    def show(self, context, image_id):
        try:
            return dict(self.images[str(image_id)])
        except KeyError:
            raise exception.ImageNotFound(image_id=image_id)

    def detail(self, context, filters=None, **kwargs):
        """The images whose fields or properties equal all ``filters``."""
        def match(meta, key, value):
            have = meta.get(key, meta['properties'].get(key))
            return str(have).lower() == str(value).lower()

        return [dict(m) for m in self.images.values()
                if all(match(m, k, v) for k, v in (filters or {}).items())]

    def get_location(self, context, image_id):
        self.show(context, image_id)
        return None, []

    def update(self, context, image_id, metadata, data=None,
               purge_props=False, **kwargs):
        image = self.images[image_id]
        image['properties'].update(metadata.pop('properties', {}))
        image.update(metadata)
        return dict(image)

    def download(self, context, image_id, data=None):
        self.show(context, image_id)
        with self._lock:
            self.downloads[image_id] += 1
        if self.gate is not None:
            self.gate.wait()
        fail_after = self.fail_after.get(image_id)
        sent = 0
        with open(self.path(image_id), 'rb') as f:
            while True:
                if fail_after is not None and sent >= fail_after:
                    raise exception.ImageDownloadFailed(
                        image_href=image_id,
                        reason='connection to the image store broke after '
                               '%d bytes' % sent)
                chunk = f.read(CHUNK)
                if not chunk:
                    return
                data.write(chunk)
                sent += len(chunk)
                if self.chunk_delay:
                    time.sleep(self.chunk_delay)


class _Session:
    def __init__(self, service):
        self._service = service
        self.temp_images = None

    def __getattr__(self, name):
        return getattr(self._service, name)


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(
        microsecond=0)
