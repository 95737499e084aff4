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

"""Which reports changed since a reader last looked: one driver per backend.

A reader that fetched every report each refresh would cost in proportion
to the cloud's size; a reader that asks a driver what changed costs in
proportion to the change. Each tooz backend tells it its own way:

* Redis (:mod:`.redis`): publishers announce each write in a change index,
  a counter and a sorted set of members by the counter's value, updated by
  one Lua script so that no announcement is seen before those numbered
  below it. A reader asks for the entries above the number it last saw.
* etcd (:mod:`.etcd3gw`): every key carries the revision that last changed
  it; a reader asks for the group's keys changed after the revision of its
  last read. Nothing is announced: the store numbers writes itself.
* a directory (:mod:`.file`): a write or a leave changes the group
  directory's time stamp; a reader reads again only when it changed.

A driver that cannot tell (an unknown backend, a lost or replaced store,
a publisher that does not announce) answers ``None`` and the reader reads
everything, as it also does every :data:`FULL_READ_INTERVAL` seconds. A
member that left is seen at such a full read; until then its report ages
out by its own time stamp, as a dead agent's does.

A driver may also check its backend before a client starts (:func:`check`):
on Redis, so that a refused password or connection fails at once instead
of after tooz's minute of retries.
"""

from mlaccel.statebus.drivers import base
from mlaccel.statebus.drivers import etcd3gw
from mlaccel.statebus.drivers import file
from mlaccel.statebus.drivers import redis

Changes = base.Changes
FULL_READ_INTERVAL = base.FULL_READ_INTERVAL

# tooz driver module -> the driver for its backend.
_DRIVERS = {
    'tooz.drivers.etcd3gw': etcd3gw.EtcdChanges,
    'tooz.drivers.file': file.FileChanges,
    'tooz.drivers.redis': redis.RedisChanges,
}


def for_client(coord, group):
    """The :class:`Changes` of ``coord``'s backend for ``group``."""
    return _DRIVERS.get(type(coord).__module__, Changes)(coord, group)


# tooz driver module -> the check made before a client of it starts.
_CHECKS = {
    'tooz.drivers.redis': redis.check,
}


def check(coord):
    """Raise now if ``coord``'s backend will not let it start.

    Call it before ``coord.start()``. Backends without a check pass.
    """
    checker = _CHECKS.get(type(coord).__module__)
    if checker is not None:
        checker(coord)
