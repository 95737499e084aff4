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

"""What tests on a real cloud look at to see what the mirror-volume cache did.

The mirror-volume cache tells what it did through notifications
(:mod:`mlaccel.cinder.notify`): ``image_volume_cache.hit`` for a volume
cloned from a golden volume, ``mlaccel.mirror.fill`` for each download into
one, ``mlaccel.mirror.degrade`` when Cinder's own path downloaded instead.
:class:`CinderEvents` collects them on an exclusive queue of its own (bound
to the notification topic, removed by RabbitMQ when the listener closes),
so it takes nothing from other consumers and leaves nothing behind.
Cinder must send them: ``[oslo_messaging_notifications] driver =
messagingv2``. The golden volumes and ready clones of an image are volumes
of Cinder's internal tenant marked with the image's id
(:mod:`mlaccel.cinder.metadata`); :func:`purge` deletes them.
:func:`make_image` and :func:`boot_from_volume` register the cleanups that
leave nothing behind.
"""

import json
import os
import socket
import threading
import time
import uuid

import kombu
from openstack import exceptions

from mlaccel.cinder import metadata

#: Cinder leaves oslo.messaging's default control exchange.
EXCHANGE = 'openstack'
TOPIC = 'notifications'


def _amqp(url):
    """kombu's URL of an oslo.messaging ``rabbit://`` transport URL."""
    if url.startswith('rabbit://'):
        return 'amqp://' + url[len('rabbit://'):]
    return url


def _unwrap(body):
    """``(event_type, payload)`` of one oslo.messaging notification."""
    if isinstance(body, (bytes, str)):
        body = json.loads(body)
    if 'oslo.message' in body:
        body = json.loads(body['oslo.message'])
    return body.get('event_type'), body.get('payload') or {}


class CinderEvents:
    """Cinder notifications from ``start`` on, kept in arrival order.

    :param url: the transport URL Cinder uses (``rabbit://...``).
    """

    def __init__(self, url, exchange=EXCHANGE, topic=TOPIC):
        self.url = url
        self.exchange = exchange
        self.topic = topic
        self.events = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error = None
        self._thread = None

    def start(self):
        """Bind the queue and start collecting; returns ``self``."""
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='cinder-notifications')
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            self.stop()
            raise RuntimeError('cannot listen to Cinder notifications: %s'
                               % (self._error or 'timed out'))
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self):
        exchange = kombu.Exchange(self.exchange, type='topic',
                                  durable=False)
        queue = kombu.Queue(
            'mlaccel-test-%s' % uuid.uuid4().hex, exchange,
            routing_key=self.topic + '.info', exclusive=True,
            auto_delete=True, durable=False)
        try:
            with kombu.Connection(_amqp(self.url)) as conn:
                with conn.Consumer(queue, callbacks=[self._on_message],
                                   accept=['json']):
                    self._ready.set()
                    while not self._stop.is_set():
                        try:
                            conn.drain_events(timeout=0.2)
                        except socket.timeout:
                            pass
        except Exception as exc:
            self._error = exc
            self._ready.set()

    def _on_message(self, body, message):
        message.ack()
        event_type, payload = _unwrap(body)
        with self._cond:
            self.events.append((event_type, payload))
            self._cond.notify_all()

    def of(self, image_id, prefix=''):
        """Event types about ``image_id`` so far, starting with ``prefix``."""
        with self._cond:
            return [event for event, payload in self.events
                    if payload.get('image_id') == image_id
                    and event.startswith(prefix)]

    def count(self, image_id, event_type):
        return self.of(image_id).count(event_type)

    def wait(self, predicate, timeout):
        """Wait until ``predicate()`` holds; return whether it did."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
            return True

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()


def cache_volumes(conn, image_id, keys=(metadata.IMAGE_KEY,
                                        metadata.POOL_KEY)):
    """The image's golden volumes and ready clones (admin connection)."""
    return [v for v in conn.block_storage.volumes(details=True,
                                                  all_projects=True)
            if any((v.metadata or {}).get(key) == image_id for key in keys)]


def golden_volumes(conn, image_id):
    return cache_volumes(conn, image_id, keys=(metadata.IMAGE_KEY,))


def wait_golden(conn, image_id, timeout):
    """The image's available golden volume, once there is one."""
    deadline = time.monotonic() + timeout
    while True:
        ready = [v for v in golden_volumes(conn, image_id)
                 if v.status == 'available']
        if ready:
            return ready[0]
        if time.monotonic() > deadline:
            raise AssertionError('no golden volume of image %s within %s s'
                                 % (image_id, timeout))
        time.sleep(0.5)


def purge(conn, image_id, timeout=120):
    """Delete the image's golden volumes and ready clones; wait until gone.

    Delete (or unmark) the image first, or the pre-warm task may make them
    again. Golden volumes go first: the driver deletes their ready clones
    with them; any clone left is deleted after.
    """
    deadline = time.monotonic() + timeout
    for key in (metadata.IMAGE_KEY, metadata.POOL_KEY):
        for volume in cache_volumes(conn, image_id, keys=(key,)):
            try:
                conn.block_storage.delete_volume(volume, force=True)
            except exceptions.BadRequestException:
                pass    # being deleted already (a clone of a golden going)
        while cache_volumes(conn, image_id, keys=(key,)):
            if time.monotonic() > deadline:
                raise AssertionError('volumes of image %s not gone within '
                                     '%s s' % (image_id, timeout))
            time.sleep(0.5)


def make_image(conn, add_cleanup, size, **properties):
    """A new public raw image of ``size`` random bytes: ``(image, data)``.

    Registers, through ``add_cleanup`` (a test's ``addCleanup``), the
    image's deletion and then that of its golden volumes and ready clones:
    cleanups run last-in first-out, so the image goes first and the
    pre-warm task cannot make its golden volume again.
    """
    data = os.urandom(size)
    image = conn.image.create_image(
        name='mlaccel-cache-%s' % uuid.uuid4().hex[:8], data=data,
        disk_format='raw', container_format='bare', visibility='public',
        **properties)
    add_cleanup(purge, conn, image.id)
    add_cleanup(conn.image.delete_image, image, ignore_missing=True)
    return image, data


def boot_from_volume(conn, add_cleanup, image_id, flavor_id, size=1):
    """A server booting from a new volume of the image, just created.

    The volume goes with the server, which ``add_cleanup`` deletes.
    """
    server = conn.compute.create_server(
        name='mlaccel-bfv-%s' % uuid.uuid4().hex[:8], flavor_id=flavor_id,
        networks='none', block_device_mapping=[{
            'boot_index': 0, 'uuid': image_id, 'source_type': 'image',
            'destination_type': 'volume', 'volume_size': size,
            'delete_on_termination': True}])
    add_cleanup(conn.compute.wait_for_delete, server, interval=0.5, wait=120)
    add_cleanup(conn.compute.delete_server, server, ignore_missing=True)
    return server
