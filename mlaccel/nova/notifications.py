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

"""Nova's versioned notifications as precise life-cycle boundaries.

Nova stamps every notification when it sends it, to the microsecond, on the
clock of the service that sent it. Three of them cut a server's life:

- ``scheduler.select_destinations.end`` (nova-scheduler): a host has been
  chosen; its ``RequestSpec`` payload names the instance (the launcher
  creates one server per request, so the spec's instance is the server);
- ``instance.create.start`` (nova-compute): the compute begins the build;
- ``instance.create.end`` (nova-compute): the compute has saved the
  instance ACTIVE; ``instance.create.error``: the build failed.

:class:`InstanceEvents` collects their timestamps per instance uuid;
:class:`NotificationSource` feeds it from an oslo.messaging notification
listener with a pool (a queue) of its own, so it never takes a message
from another consumer of the same topic. Nova publishes versioned
notifications only with ``[notifications] notification_format`` set to
``versioned`` or ``both`` and ``[oslo_messaging_notifications] driver =
messagingv2``. oslo.messaging is needed only for the listener
(``pip install mlaccel[notifications]``).
"""

import collections
import re
import threading
import time
import uuid

from oslo_log import log as logging

from mlaccel.nova import actions

LOG = logging.getLogger(__name__)

SCHEDULE_END = 'scheduler.select_destinations.end'
CREATE_START = 'instance.create.start'
CREATE_END = 'instance.create.end'
CREATE_ERROR = 'instance.create.error'
EVENT_TYPES = (SCHEDULE_END, CREATE_START, CREATE_END, CREATE_ERROR)
#: Nova sends its notifications to this exchange (its ``control_exchange``).
EXCHANGE = 'nova'
#: Seconds of one notification timestamp: oslo.messaging writes them with
#: microseconds.
PRECISION = 1e-6


_USERINFO = re.compile(r'(?<=[/,])([^:/@,]*):([^@/,]*)@')


def masked(text, url):
    """``text`` with the passwords of the transport ``url`` as ``***``.

    A transport URL may name several hosts, each with its own user and
    password: ``rabbit://user:pass@host1:5672,user:pass@host2:5672/``.
    """
    text = str(text)
    for match in _USERINFO.finditer(url or ''):
        if match.group(2):
            text = text.replace(match.group(0),
                                '%s:***@' % match.group(1))
            text = text.replace(match.group(2), '***')
    return text


class Unreachable(Exception):
    """The notification transport cannot be reached."""


def instance_uuid(event_type, payload):
    """The instance a versioned notification is about, or ``None``."""
    data = payload.get('nova_object.data') if isinstance(payload, dict) \
        else None
    if not isinstance(data, dict):
        return None
    key = 'instance_uuid' if event_type.startswith('scheduler.') else 'uuid'
    value = data.get(key)
    return value if isinstance(value, str) else None


class InstanceEvents:
    """Timestamps of the notifications above, per instance; thread-safe.

    Keeps the latest ``capacity`` instances seen (a listener hears about
    every instance of the cloud, not only the launch's).
    """

    def __init__(self, capacity=10000):
        self.capacity = capacity
        self._by_uuid = collections.OrderedDict()
        self._cond = threading.Condition()

    def add(self, event_type, payload, timestamp):
        """Record one notification; returns whether it was one of ours.

        :param timestamp: the notification's timestamp (oslo.messaging's
            ``metadata['timestamp']``, UTC) or a UNIX time.
        """
        if event_type not in EVENT_TYPES:
            return False
        server = instance_uuid(event_type, payload)
        try:
            when = actions.parse_time(timestamp)
        except (TypeError, ValueError):
            when = None
        if server is None or when is None:
            LOG.debug('Ignoring %s without instance or timestamp', event_type)
            return False
        with self._cond:
            seen = self._by_uuid.setdefault(server, {})
            self._by_uuid.move_to_end(server)
            while len(self._by_uuid) > self.capacity:
                self._by_uuid.popitem(last=False)
            seen.setdefault(event_type, []).append(when)
            self._cond.notify_all()
        return True

    def times(self, server):
        """Boundaries of one instance from what has arrived.

        :returns: dict with ``scheduled`` (the first
            ``select_destinations.end``: the first host chosen),
            ``build_started`` (the first ``instance.create.start``),
            ``active`` (the last ``instance.create.end``), ``failed`` (the
            last ``instance.create.error``), each a UNIX time or ``None``,
            and ``builds``, the number of builds begun (more than one
            after a re-schedule).
        """
        with self._cond:
            seen = {event: list(whens) for event, whens in
                    self._by_uuid.get(server, {}).items()}

        def first(event):
            return min(seen[event]) if event in seen else None

        def last(event):
            return max(seen[event]) if event in seen else None
        return {'scheduled': first(SCHEDULE_END),
                'build_started': first(CREATE_START),
                'active': last(CREATE_END), 'failed': last(CREATE_ERROR),
                'builds': len(seen.get(CREATE_START, ()))}

    def wait(self, predicate, timeout):
        """Wait until ``predicate()`` holds or ``timeout`` seconds pass.

        ``predicate`` is called with the lock held and new notifications
        wake the wait. Returns the last value of ``predicate()``.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate()
                remaining = deadline - time.monotonic()
                if result or remaining <= 0:
                    return result
                self._cond.wait(remaining)


class _Endpoint:
    """oslo.messaging endpoint handing notifications to the collector."""

    def __init__(self, events):
        self.events = events

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.events.add(event_type, payload, metadata.get('timestamp'))

    error = info


class NotificationSource:
    """Listen to Nova's versioned notifications for the launcher.

    :param url: oslo.messaging transport URL of Nova's notifications (e.g.
        ``rabbit://user:password@host:5672/``).
    :param conf: ``oslo_config`` object; its ``[oslo_messaging_*]`` groups
        (TLS, heartbeats...) configure the transport.
    :param topic: Nova's ``[notifications] versioned_notifications_topics``.
    :param events: an :class:`InstanceEvents` to fill (a new one by default).

    The listener consumes from a queue named after a fresh pool of its own,
    bound to the topic; :meth:`stop` deletes that queue on RabbitMQ so that
    it does not go on collecting every notification of the cloud.
    """

    def __init__(self, url, conf, topic='versioned_notifications',
                 events=None):
        self.url = url
        self.conf = conf
        self.topic = topic
        self.events = events or InstanceEvents()
        self.pool = 'mlaccel-launcher-%s' % uuid.uuid4().hex
        self._transport = None
        self._listener = None

    def start(self):
        """Bind the pool's queue and start consuming; returns ``self``.

        Notifications sent before this returns may be missed.
        """
        if self._listener is not None:
            return self
        import oslo_messaging
        self._transport = oslo_messaging.get_notification_transport(
            self.conf, url=self.url)
        targets = [oslo_messaging.Target(topic=self.topic,
                                         exchange=EXCHANGE)]
        self._listener = oslo_messaging.get_notification_listener(
            self._transport, targets, [_Endpoint(self.events)],
            executor='threading', pool=self.pool)
        try:
            # oslo.messaging retries an unreachable RabbitMQ for ever: fail
            # fast instead, and let the launcher fall back.
            try:
                probe = rabbit_connection(self.conf, self.url)
            except Exception as exc:
                raise Unreachable(masked('cannot reach %s: %s' % (
                    self.url, exc), self.url)) from exc
            if probe is not None:
                probe.release()
            self._listener.start()
        except Exception:
            self._listener = None
            self._transport.cleanup()
            self._transport = None
            raise
        LOG.debug('Listening to %s notifications on %s (pool %s)',
                  self.topic, masked(self.url, self.url), self.pool)
        return self

    def stop(self):
        """Stop consuming and remove the pool's queue (best effort)."""
        if self._listener is None:
            return
        try:
            self._listener.stop()
            self._listener.wait()
        finally:
            self._listener = None
            try:
                _delete_pool_queue(self.conf, self.url, self.pool)
            finally:
                self._transport.cleanup()
                self._transport = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def times(self, server):
        return self.events.times(server)


def rabbit_connection(conf, url, timeout=10.0):
    """An open kombu connection to the URL's RabbitMQ, or ``None``.

    ``None`` for other drivers; raises the last error if no host answers.
    The URL's transport must exist (it registers the driver's options).
    """
    import kombu
    import oslo_messaging
    parsed = oslo_messaging.TransportURL.parse(conf, url)
    if parsed.transport not in ('rabbit', 'kombu', 'amqp') or \
            not parsed.hosts:
        return None
    rabbit = conf.oslo_messaging_rabbit
    ssl = None
    if rabbit.ssl:
        ssl = {key: value for key, value in (
            ('ca_certs', rabbit.ssl_ca_file),
            ('certfile', rabbit.ssl_cert_file),
            ('keyfile', rabbit.ssl_key_file)) if value} or True
    error = None
    for host in parsed.hosts:
        connection = kombu.Connection(
            hostname=host.hostname, port=host.port, userid=host.username,
            password=host.password, virtual_host=parsed.virtual_host or '/',
            ssl=ssl, connect_timeout=timeout)
        try:
            connection.ensure_connection(max_retries=1, interval_start=0.5)
            return connection
        except Exception as exc:
            connection.release()
            error = exc
    raise error


def _delete_pool_queue(conf, url, pool):
    """Delete the pool's queue on RabbitMQ; other drivers keep none."""
    try:
        connection = rabbit_connection(conf, url)
        if connection is not None:
            with connection:
                connection.default_channel.queue_delete(queue=pool)
    except Exception as exc:
        LOG.warning('Cannot delete the notification queue %s of this '
                    'launch: %s; delete it by hand', pool, masked(exc, url))
