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

"""Nova's versioned notifications of this host, fed to build pacing.

nova-compute sends ``instance.create.start``, ``.end`` and ``.error``
(publisher ``nova-compute:<host>``) when ``[notifications]
notification_format`` is ``versioned`` or ``both`` and
``[oslo_messaging_notifications] driver = messagingv2``. The listener
consumes from a pool of its own (a queue named
``<notification_pool>-<host>`` on RabbitMQ), so it takes no notification
from another consumer, and hands those of its own host to a
:class:`~mlaccel.agent.builds.BuildTracker`; the image of every build
started anywhere counts as demand for it (:class:`~mlaccel.agent.hot.
Demand`). A notification it cannot
parse is logged and skipped.

An unreachable transport at start is retried in the background with
backoff; once connected, oslo.messaging reconnects by itself.
"""

import threading

from oslo_log import log as logging
import tenacity

from mlaccel.nova import actions
from mlaccel.nova import notifications as nova_notifications

LOG = logging.getLogger(__name__)

CREATE_START = nova_notifications.CREATE_START
CREATE_END = nova_notifications.CREATE_END
CREATE_ERROR = nova_notifications.CREATE_ERROR
EVENT_TYPES = (CREATE_START, CREATE_END, CREATE_ERROR)


class BadNotification(ValueError):
    """A notification of ours whose content cannot be used."""


def parse(publisher_id, event_type, payload, metadata):
    """``(instance uuid, host, UNIX time)`` of one create notification.

    :raises BadNotification: with the reason.
    """
    data = payload.get('nova_object.data') if isinstance(payload, dict) \
        else None
    if not isinstance(data, dict):
        raise BadNotification('payload has no nova_object.data object')
    instance = data.get('uuid')
    if not isinstance(instance, str) or not instance:
        raise BadNotification('payload has no instance uuid')
    host = data.get('host')
    if not isinstance(host, str) or not host:
        # The publisher id is "nova-compute:<host>".
        host = publisher_id.partition(':')[2] \
            if isinstance(publisher_id, str) else ''
    stamp = metadata.get('timestamp') if isinstance(metadata, dict) else None
    try:
        when = actions.parse_time(stamp)
    except (TypeError, ValueError) as exc:
        raise BadNotification('timestamp %r: %s' % (stamp, exc))
    if when is None:
        raise BadNotification('no timestamp')
    return instance, host, when


class Endpoint:
    """oslo.messaging notification endpoint for one host's builds.

    :param on_image: called with the image id of every build of the host
        (how the inventory learns the ids of images in demand).
    :param on_demand: called with ``(image id, UNIX time)`` of every build
        started on any host of the cloud (demand for the image).
    """

    def __init__(self, host, tracker, on_image=None, on_demand=None):
        self.host = host
        self.tracker = tracker
        self.on_image = on_image
        self.on_demand = on_demand
        self.skipped = 0

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        if event_type not in EVENT_TYPES:
            return None
        try:
            instance, host, when = parse(publisher_id, event_type, payload,
                                         metadata)
        except BadNotification as exc:
            self.skipped += 1
            LOG.warning('Skipped a %s notification from %s: %s', event_type,
                        publisher_id, exc)
            return None
        image = payload['nova_object.data'].get('image_uuid')
        if not isinstance(image, str) or not image:
            image = None
        if self.on_demand is not None and image and \
                event_type == CREATE_START:
            self.on_demand(image, when)
        if host != self.host:
            return None
        if self.on_image is not None and image:
            self.on_image(image)
        if event_type == CREATE_START:
            self.tracker.started(instance, when)
        else:
            self.tracker.ended(instance, when, ok=event_type == CREATE_END)
        return None

    error = info
    warn = info


class Listener:
    """Listen to this host's build notifications.

    :param settings: :class:`~mlaccel.agent.novaconf.NovaSettings` (the
        transport and topics come from nova.conf).
    :param pool: the pool (queue) name.
    :param tracker: the :class:`~mlaccel.agent.builds.BuildTracker`.
    :param url: a transport URL overriding nova.conf's (tests).
    :param on_image: see :class:`Endpoint`.
    :param on_demand: see :class:`Endpoint`.
    """

    MAX_BACKOFF = 60.0

    def __init__(self, settings, pool, tracker, url=None, on_image=None,
                 on_demand=None):
        self.settings = settings
        self.conf = settings.conf
        self.url = url or settings.transport_url
        self.pool = pool
        self.endpoint = Endpoint(settings.host, tracker, on_image, on_demand)
        self._listener = None
        #: The oslo.messaging transport, once connected.
        self.transport = None
        self._stopping = threading.Event()
        self._thread = None
        self.connected = threading.Event()

    def start(self):
        """Connect in the background (retrying); returns at once."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._connect, daemon=True,
                                        name='mlaccel-agent-notifications')
        self._thread.start()

    def _connect(self):
        def attempt():
            if not self._stopping.is_set():
                self._start_listener()
                if retrying.statistics.get('attempt_number', 1) > 1:
                    LOG.info('Notification transport reachable again')

        def warn_once(state):
            if state.attempt_number == 1:
                LOG.warning('Cannot listen to Nova\'s notifications, '
                            'retrying with backoff: %s',
                            nova_notifications.masked(
                                state.outcome.exception(), self.url))

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Exception),
            stop=lambda state: self._stopping.is_set(),
            wait=tenacity.wait_exponential(multiplier=1.0,
                                           max=self.MAX_BACKOFF),
            sleep=self._stopping.wait, before_sleep=warn_once,
            reraise=True)
        try:
            retrying(attempt)
        except Exception:
            pass  # stopped while failing: warned already

    def _start_listener(self):
        import oslo_messaging
        transport = oslo_messaging.get_notification_transport(
            self.conf, url=self.url)
        try:
            # oslo.messaging retries an unreachable RabbitMQ for ever in
            # start(): probe once first so a stop stays prompt.
            probe = nova_notifications.rabbit_connection(self.conf, self.url)
            if probe is not None:
                probe.release()
            targets = [oslo_messaging.Target(
                topic=topic, exchange=nova_notifications.EXCHANGE)
                for topic in self.settings.topics]
            listener = oslo_messaging.get_notification_listener(
                transport, targets, [self.endpoint], executor='threading',
                pool=self.pool)
            listener.start()
        except Exception:
            transport.cleanup()
            raise
        self.transport, self._listener = transport, listener
        self.connected.set()
        LOG.info('Listening to Nova\'s notifications of host %s (pool %s)',
                 self.settings.host, self.pool)

    def stop(self):
        """Stop consuming; the pool's queue stays for the next start."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(10)
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.stop()
                listener.wait()
            finally:
                self.transport.cleanup()
                self.transport = None
