"""Publish this node's host report on the state bus."""

import threading

from oslo_log import log as logging
import tooz
from tooz import coordination

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from mlaccel import statebus

LOG = logging.getLogger(__name__)


class Publisher:
    """Keeps one host's report on the bus as its group capabilities.

    The member id is the host name, so a restarted agent replaces its
    predecessor's entry. Thread-safe; :meth:`publish` may be called from any
    thread.
    """

    def __init__(self, host, conf=None):
        self.host = host
        self.conf = conf or mlaccel_conf.CONF
        self._group = statebus.group_id(self.conf)
        self._lock = threading.Lock()
        self._coordinator = None
        self._joined = False

    def start(self):
        with self._lock:
            if self._coordinator is None:
                coord = statebus.coordinator(self.conf, self.host)
                coord.start(start_heart=True)
                self._coordinator = coord
                try:
                    coord.create_group(self._group).get()
                except coordination.GroupAlreadyExist:
                    pass

    def publish(self, report):
        """Encode and publish ``report``; raises what tooz raises."""
        if report.host != self.host:
            raise ValueError('report of host %r given to the publisher of %r'
                             % (report.host, self.host))
        raw = hostreport.encode(
            report, self.conf.mlaccel_statebus.max_report_bytes)
        self.start()
        with self._lock:
            coord = self._coordinator
            if self._joined:
                try:
                    coord.update_capabilities(self._group, raw).get()
                    return
                except tooz.NotImplemented:
                    # The file backend cannot update in place.
                    coord.leave_group(self._group).get()
                    self._joined = False
            try:
                coord.join_group(self._group, raw).get()
            except coordination.MemberAlreadyExist:
                # Left behind by a predecessor with the same host name.
                coord.leave_group(self._group).get()
                coord.join_group(self._group, raw).get()
            self._joined = True

    def stop(self):
        """Leave the group (the report disappears) and stop the client."""
        with self._lock:
            coord, self._coordinator = self._coordinator, None
            if coord is None:
                return
            try:
                if self._joined:
                    coord.leave_group(self._group).get()
            except tooz.ToozError as exc:
                LOG.warning('Could not leave the state bus group: %s', exc)
            finally:
                self._joined = False
                coord.stop()
