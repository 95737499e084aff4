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

"""What a long-running mlaccel service does besides its work.

Readiness to systemd (``sd_notify`` over the ``NOTIFY_SOCKET`` datagram
socket, for ``Type=notify`` units), configuration reload on SIGHUP
(``ConfigOpts.mutate_config_files``: options marked mutable, oslo.log's
``debug`` among them, take their new values) and a stop on SIGTERM or
SIGINT. This module imports nothing from mlaccel's service packages.
"""

import os
import signal
import socket
import threading

from oslo_log import log as logging

from mlaccel import periodic

LOG = logging.getLogger(__name__)

#: Seconds the main thread sleeps at most between two looks at signals.
SIGNAL_POLL = 1.0


def notify(state):
    """Send ``state`` (e.g. ``'READY=1'``) to systemd; whether it went.

    Does nothing without ``NOTIFY_SOCKET``; a leading ``@`` names an
    abstract socket.
    """
    address = os.environ.get('NOTIFY_SOCKET')
    if not address:
        return False
    if address.startswith('@'):
        address = '\0' + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError as exc:
        LOG.warning('Cannot notify systemd (%s): %s', state, exc)
        return False
    return True


def reload_config(conf):
    """Re-read ``conf``'s files; mutable options take their new values."""
    LOG.info('Reloading the configuration')
    try:
        conf.mutate_config_files()
    except Exception as exc:
        LOG.error('Reloading the configuration failed; the old one stays: '
                  '%s', exc)


def serve(conf, name, start, stop):
    """Run a service in the calling (main) thread until SIGTERM or SIGINT.

    Calls ``start()``, tells systemd READY=1, reloads ``conf`` on each
    SIGHUP (outside the signal handler), and on a stop signal tells
    systemd STOPPING=1 and calls ``stop()``.
    """
    hup = threading.Event()

    def on_signal(signum, frame):
        if signum == signal.SIGHUP:
            hup.set()
            loop.wake()
        else:
            LOG.info('Signal %d: stopping', signum)
            loop.stop()

    def reload_if_asked():
        if hup.is_set():
            hup.clear()
            reload_config(conf)

    loop = periodic.Periodic(name + '-main', SIGNAL_POLL, reload_if_asked,
                             initial_delay=SIGNAL_POLL, wakeable=True)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    start()
    notify('READY=1')
    try:
        loop.run()
    finally:
        notify('STOPPING=1')
        stop()
