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

"""Notifications of the mirror-volume cache.

Cinder's own ``image_volume_cache.{hit,miss,evict}`` (payload ``image_id``,
``host``), so existing consumers keep working, plus ``mlaccel.mirror.*``:
``join`` (a request waited for another's download instead of downloading),
``fill`` (a golden volume was made; ``seconds``), ``prewarm``, ``degrade``
(the request took Cinder's normal path; ``reason``), ``rebuild`` (a golden
volume found gone was dropped), ``pool_hit`` (a request took a ready clone)
and ``pool_fill`` (a ready clone was made).
"""

from oslo_log import log as logging

from cinder import context as cinder_context
from cinder import rpc
from cinder import utils

LOG = logging.getLogger(__name__)


class Notifier:
    def __init__(self, host):
        self.host = host

    @utils.if_notifications_enabled
    def _send(self, context, event, payload):
        context = context or cinder_context.get_admin_context()
        rpc.get_notifier('volume', self.host).info(context, event, payload)

    def cache(self, context, action, image_id):
        self._send(context, 'image_volume_cache.%s' % action,
                   {'image_id': image_id, 'host': self.host})

    def mirror(self, context, action, image_id, **extra):
        payload = dict(extra, image_id=image_id, host=self.host)
        LOG.debug('mirror %s: %s', action, payload)
        self._send(context, 'mlaccel.mirror.%s' % action, payload)
