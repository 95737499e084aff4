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

"""The servers of one launch: create them, watch them, delete every one.

Every server a launch makes is named ``<prefix>-<launch id>-<index>`` and
carries the metadata ``mlaccel_launch=<launch id>``. Ids are tracked from the
create responses; a create that fails after Nova took the request (a lost
response, a timeout) leaves a server the launcher has no id for, so cleanup
also lists servers by that name and tag and deletes what it finds, until a
list shows none left. One list call (a name regex, detailed) serves both the
status polling of all servers and the cleanup sweep.
"""

import base64
import concurrent.futures
import threading

from openstack import exceptions as sdk_exc
from oslo_log import log as logging
import tenacity

LOG = logging.getLogger(__name__)

TAG_KEY = 'mlaccel_launch'
GONE = ('DELETED', 'SOFT_DELETED')


def boot_volume(image_id, size_gb):
    """The block device mapping of a server booting from a new volume.

    Cinder makes a ``size_gb`` GiB volume from the image; Nova boots from
    it and deletes it with the server.
    """
    if isinstance(size_gb, bool) or not isinstance(size_gb, int) \
            or size_gb < 1:
        raise ValueError('a boot volume needs a size of at least 1 GiB, '
                         'got %r' % (size_gb,))
    return [{'boot_index': 0, 'uuid': image_id, 'source_type': 'image',
             'destination_type': 'volume', 'volume_size': size_gb,
             'delete_on_termination': True}]


class ServerSet:
    """Servers of one launch, tracked thread-safely.

    :param conn: an ``openstack.connection.Connection``.
    :param launch_id: the launch's unique id (letters, digits, ``-``).
    :param name_prefix: first part of every server's name.
    :param boot_volume_gb: boot every server from a new volume of this
        many GiB made from the image (deleted with the server); ``None``:
        image-backed servers.
    """

    def __init__(self, conn, launch_id, name_prefix='mlaccel',
                 boot_volume_gb=None):
        self.conn = conn
        self.launch_id = launch_id
        self.name_prefix = name_prefix
        self.boot_volume_gb = boot_volume_gb
        self._ids = {}
        self._lock = threading.Lock()

    def name(self, index):
        return '%s-%s-%d' % (self.name_prefix, self.launch_id, index)

    @property
    def name_filter(self):
        """Nova's ``name`` query is a regular expression."""
        return '^%s-%s-' % (self.name_prefix, self.launch_id)

    @property
    def ids(self):
        with self._lock:
            return dict(self._ids)

    def create(self, index, image_id, flavor_id, networks='none',
               user_data=None, group_id=None, metadata=None):
        """Create server ``index`` and track its id; return the server."""
        attrs = {'name': self.name(index), 'image_id': image_id,
                 'flavor_id': flavor_id, 'networks': networks,
                 'metadata': dict(metadata or {}, **{TAG_KEY: self.launch_id})}
        if self.boot_volume_gb:
            del attrs['image_id']
            attrs['block_device_mapping'] = boot_volume(image_id,
                                                        self.boot_volume_gb)
        if user_data is not None:
            if isinstance(user_data, str):
                user_data = user_data.encode()
            attrs['user_data'] = base64.b64encode(user_data).decode()
        if group_id:
            attrs['scheduler_hints'] = {'group': group_id}
        server = self.conn.compute.create_server(**attrs)
        with self._lock:
            self._ids[server.id] = attrs['name']
        return server

    def list(self):
        """``{id: server}`` of this launch's servers, in one API call."""
        found = {}
        for server in self.conn.compute.servers(details=True,
                                                name=self.name_filter):
            if (server.metadata or {}).get(TAG_KEY) == self.launch_id:
                found[server.id] = server
        return found

    def delete_all(self, timeout=120.0, interval=1.0, workers=8):
        """Delete every server of the launch and wait until none is listed.

        Servers found by name and tag are deleted too, also ones that
        appear while waiting. Never raises for a server that cannot be
        deleted: it is reported.

        :returns: ``{'deleted': [ids], 'leaked': [ids]}``.
        """
        requested = set()
        pending = set(self.ids)

        def sweep():
            """Ask for the pending deletions; return what is still listed."""
            nonlocal pending
            list(pool.map(self._delete, sorted(pending)))
            requested.update(pending)
            try:
                listed = {sid: server
                          for sid, server in self.list().items()
                          if server.status not in GONE}
            except sdk_exc.SDKException as exc:
                LOG.warning('Cannot list servers of launch %s: %s',
                            self.launch_id, exc)
                listed = dict.fromkeys(requested)
            # New ones (a create whose response was lost) and ones whose
            # delete did not take (not "deleting") are asked again.
            pending = {sid for sid, server in listed.items()
                       if sid not in requested or server is None
                       or server.task_state != 'deleting'}
            return listed

        with concurrent.futures.ThreadPoolExecutor(
                workers, thread_name_prefix='mlaccel-delete') as pool:
            listed = tenacity.Retrying(
                stop=tenacity.stop_after_delay(timeout),
                wait=tenacity.wait_fixed(interval),
                retry=tenacity.retry_if_result(bool),
                retry_error_callback=lambda state: state.outcome.result(),
            )(sweep)
        if listed:
            LOG.error('Servers of launch %s still exist after %.0f s: %s',
                      self.launch_id, timeout, ', '.join(sorted(listed)))
        return {'deleted': sorted(requested - set(listed)),
                'leaked': sorted(listed)}

    def _delete(self, server_id):
        try:
            self.conn.compute.delete_server(server_id, ignore_missing=True)
        except sdk_exc.SDKException as exc:
            LOG.warning('Deleting server %s failed (will retry): %s',
                        server_id, exc)
