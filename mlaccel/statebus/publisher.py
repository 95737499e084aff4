"""Publish this node's host report on the state bus."""

import threading

from oslo_log import log as logging
import tooz
from tooz import coordination

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from mlaccel import statebus

LOG = logging.getLogger(__name__)

# What tooz raises when the bus no longer holds our group or membership.
_LOST = (coordination.GroupNotCreated, coordination.MemberNotJoined)


class Publisher:
    """Keeps one host's report on the bus as its group capabilities.

    The member id is the host name, so a restarted agent replaces its
    predecessor's entry. Thread-safe; :meth:`publish` may be called from any
    thread. Liveness heartbeats run in a thread of our own rather than
    tooz's, whose heartbeat retries an unreachable backend for ever and so
    would never let :meth:`stop` return.
    """

    def __init__(self, host, conf=None):
        self.host = host
        self.conf = conf or mlaccel_conf.CONF
        self._group = statebus.group_id(self.conf)
        self._lock = threading.Lock()
        self._coordinator = None
        self._joined = False
        self._stopping = threading.Event()
        self._heart = None

    def start(self):
        with self._lock:
            if self._coordinator is None:
                coord = statebus.coordinator(self.conf, self.host)
                coord.start(start_heart=False)
                self._coordinator = coord
                try:
                    coord.create_group(self._group).get()
                except coordination.GroupAlreadyExist:
                    pass
                self._stopping.clear()
                self._heart = threading.Thread(
                    target=self._beat, args=(coord,), daemon=True,
                    name='mlaccel-statebus-heartbeat')
                self._heart.start()

    def _beat(self, coord):
        interval, failing = 1.0, False
        while not self._stopping.wait(interval):
            try:
                # tooz answers with the seconds until the next one is due.
                interval = min(max(coord.heartbeat() or 1.0, 0.5), 10.0)
                if failing:
                    LOG.info('State bus heartbeats go through again.')
                failing = False
            except Exception as exc:
                if not failing:
                    LOG.warning('State bus heartbeat failed, retrying: %s',
                                exc)
                interval, failing = 1.0, True

    def publish(self, report):
        """Encode and publish ``report``; raises what tooz raises."""
        if report.host != self.host:
            raise ValueError('report of host %r given to the publisher of %r'
                             % (report.host, self.host))
        opts = self.conf.mlaccel_statebus
        raw = hostreport.encode(report, opts.max_report_bytes,
                                opts.max_cached_images)
        self.start()
        with self._lock:
            coord = self._coordinator
            if self._joined:
                try:
                    coord.update_capabilities(self._group, raw).get()
                    return
                except tooz.NotImplemented:
                    # The file backend cannot update in place.
                    self._leave(coord)
                except _LOST:
                    pass  # the bus lost our entry, e.g. a restarted Redis
                self._joined = False
            try:
                coord.join_group(self._group, raw).get()
            except coordination.MemberAlreadyExist:
                # Left behind by a predecessor with the same host name.
                self._leave(coord)
                coord.join_group(self._group, raw).get()
            except coordination.GroupNotCreated:
                # Gone with the bus's data: create it again.
                try:
                    coord.create_group(self._group).get()
                except coordination.GroupAlreadyExist:
                    pass
                coord.join_group(self._group, raw).get()
            # A liveness mark now: a Redis that lost its data also lost it,
            # and readers drop members without one.
            coord.heartbeat()
            self._joined = True

    def _leave(self, coord):
        try:
            coord.leave_group(self._group).get()
        except _LOST:
            pass

    def stop(self):
        """Leave the group (the report disappears) and stop the client.

        Returns within a few seconds even when the bus is unreachable.
        """
        self._stopping.set()
        heart, self._heart = self._heart, None
        if heart is not None:
            heart.join(statebus.STOP_TIMEOUT)
        with self._lock:
            coord, self._coordinator = self._coordinator, None
            joined, self._joined = self._joined, False
        if coord is not None:
            statebus.stop_quietly(coord, self._group if joined else None)
