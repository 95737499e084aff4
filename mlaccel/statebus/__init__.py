"""The state bus: host reports carried over a tooz coordination backend.

Agents publish (:mod:`mlaccel.statebus.publisher`); the scheduler plugins
read every host's report from an in-memory cache that a background thread
refreshes (:mod:`mlaccel.statebus.reader`).
"""

import threading

from oslo_log import log as logging
from tooz import coordination

LOG = logging.getLogger(__name__)

#: Seconds a shutdown waits for a tooz client to stop. A client of an
#: unreachable Redis retries for about a minute before giving up.
STOP_TIMEOUT = 5.0


def coordinator(conf, member_id):
    """Return a tooz coordinator for the configured bus, not yet started."""
    return coordination.get_coordinator(
        conf.mlaccel_statebus.backend_url,
        member_id.encode() if isinstance(member_id, str) else member_id)


def group_id(conf):
    return conf.mlaccel_statebus.group.encode()


def stop_quietly(coord, leave=None, timeout=STOP_TIMEOUT):
    """Stop a tooz client without letting a dead backend block the caller.

    :param leave: a group to leave first, if any.

    The work runs in a daemon thread; after ``timeout`` seconds the caller
    goes on and the thread finishes (or dies with the process) on its own.
    """
    def _stop():
        try:
            if leave is not None:
                coord.leave_group(leave).get()
        except Exception as exc:
            LOG.warning('Could not leave the state bus group: %s', exc)
        try:
            coord.stop()
        except Exception as exc:
            LOG.debug('Ignored error stopping a state bus client: %s', exc)

    thread = threading.Thread(target=_stop, name='mlaccel-statebus-stop',
                              daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        LOG.warning('State bus client still stopping after %.0f s; going on '
                    'without waiting for it.', timeout)
