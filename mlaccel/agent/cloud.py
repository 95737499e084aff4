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

"""The agent's one openstacksdk connection, opened on first use."""

import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class Cloud:
    """A lazily opened connection to the cloud of ``[mlaccel_agent] cloud``.

    :param name: the cloud's name in clouds.yaml (``None``: no cloud).
    :param connect: opens a connection from a cloud name (default:
        ``openstack.connect``); tests pass one to a cloud of their own.
    """

    def __init__(self, name, connect=None):
        self.name = name
        self._connect = connect
        self._conn = None
        self._lock = threading.Lock()

    @property
    def configured(self):
        return bool(self.name) or self._connect is not None

    def connection(self):
        """The connection; raises what openstacksdk raises."""
        with self._lock:
            if self._conn is None:
                if self._connect is None:
                    import openstack
                    self._conn = openstack.connect(cloud=self.name)
                else:
                    self._conn = self._connect(self.name)
            return self._conn

    def close(self):
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:
                LOG.debug('Ignored error closing the cloud connection: %s',
                          exc)
