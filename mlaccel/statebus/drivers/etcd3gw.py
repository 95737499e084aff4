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

"""etcd: every key carries the revision that last changed it.

A full read is one range request over the group's keys. A later refresh
is one transaction of two ranges: the keys whose ``mod_revision`` is above
the store's revision at the last read (etcd filters them on its side; the
reply holds only what changed), and the number of keys, which tells that a
member left (a deleted key is in no range). Publishers announce nothing.
A store whose cluster id changed or whose revision went back (restored
from a backup), and a member gone, make the reader read everything again.
"""

import base64

from tooz import coordination
from tooz import utils

from mlaccel.statebus.drivers import base


def _b64(data):
    return base64.b64encode(data).decode('ascii')


def _range_end(prefix):
    """The first key after every key starting with ``prefix``."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


class EtcdChanges(base.Changes):
    """One group's changes by etcd revision, through tooz's etcd3gw client.

    It asks etcd's JSON gateway directly, with the driver's client and its
    group prefix: tooz returns no revision.
    """

    def __init__(self, coord, group):
        super().__init__(coord, group)
        self._prefix = coord._prefix_group(group)
        # (cluster id, revision) of the last read; None: read everything.
        self._seen = None

    def _range(self, **options):
        return dict(key=_b64(self._prefix),
                    range_end=_b64(_range_end(self._prefix)), **options)

    def _members(self, reply):
        """``({member: raw}, group found)`` of a range's reply."""
        members, found = {}, False
        for kv in reply.get('kvs', ()):
            key = base64.b64decode(kv['key'])
            if key == self._prefix:
                found = True
                continue
            raw = base64.b64decode(kv.get('value', ''))
            members[key[len(self._prefix):]] = utils.loads(raw) if raw \
                else None
        return members, found

    def _post(self, path, body):
        client = self.coord.client
        reply = client.post(client.get_url(path), json=body)
        header = reply['header']
        return reply, (header.get('cluster_id'), int(header['revision']))

    def read_all(self):
        self._seen = None
        reply, seen = self._post('/kv/range', self._range())
        members, found = self._members(reply)
        if not found:
            raise coordination.GroupNotCreated(self.group)
        self._seen, self._held = seen, set(members)
        return members

    def read_changed(self):
        if self._seen is None:
            return None
        reply, seen = self._post('/kv/txn', {'success': [
            {'request_range': self._range(
                min_mod_revision=self._seen[1] + 1)},
            {'request_range': self._range(count_only=True)}]})
        if seen[0] != self._seen[0] or seen[1] < self._seen[1]:
            self._seen = None
            return None
        self._seen = seen
        changed, counted = (r['response_range'] for r in reply['responses'])
        members, _ = self._members(changed)
        # The count holds the group's own key beside its members'.
        return self._tally(members, int(counted.get('count', 0)) - 1)
