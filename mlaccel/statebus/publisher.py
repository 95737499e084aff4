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

"""Publish one node's report on the state bus."""

import threading
import time

from oslo_log import log as logging
import tooz
from tooz import coordination

from mlaccel import conf as mlaccel_conf
from mlaccel import statebus
from mlaccel.statebus import codec as bus_codec
from mlaccel.statebus import keys
from mlaccel.statebus import signing

LOG = logging.getLogger(__name__)

# What tooz raises when the bus no longer holds our group or membership.
_LOST = (coordination.GroupNotCreated, coordination.MemberNotJoined)


class HostClaimed(Exception):
    """Another live client holds this host's member id on the bus."""


class Publisher:
    """Keeps one host's report on the bus as its group capabilities.

    :param host: the name reports speak for; also the member id.
    :param conf: a ``ConfigOpts`` with ``[mlaccel_statebus]``.
    :param codec: encodes reports (default: host reports,
        :class:`~mlaccel.statebus.codec.HostReportCodec`).
    :param group: tooz group name (default ``[mlaccel_statebus] group``).
    :param key: this host's key (bytes); default: read from
        ``[mlaccel_statebus] host_key_file``; none: reports go unsigned.

    The member id is the host name. A member already there is replaced only
    with proof that it is this host's own earlier agent or useless to
    readers: its report verifies with this host's key, or is unsigned while
    this publisher signs, or is invalid, stale or dated in the future.
    Otherwise :meth:`publish` raises :class:`HostClaimed` and the holder
    stays.

    Thread-safe; :meth:`publish` may be called from any thread. Liveness
    heartbeats run in a thread of our own rather than tooz's, whose
    heartbeat retries an unreachable backend for ever and so would never
    let :meth:`stop` return.
    """

    def __init__(self, host, conf=None, codec=None, group=None, key=None):
        self.host = host
        self.conf = conf or mlaccel_conf.CONF
        self.codec = codec or bus_codec.HostReportCodec.from_conf(self.conf)
        self._group = (group.encode() if group is not None
                       else statebus.group_id(self.conf))
        self._key = key
        self._lock = threading.Lock()
        self._coordinator = None
        self._joined = False
        self._stopping = threading.Event()
        self._heart = None

    def _load_key(self):
        if self._key is None:
            path = self.conf.mlaccel_statebus.host_key_file
            if path:
                self._key = keys.read_host_key(path)
            else:
                self._key = b''
                LOG.warning('No [mlaccel_statebus] host_key_file: reports '
                            'of %s go unsigned, and readers holding a '
                            'deployment key reject them.', self.host)

    def start(self):
        """Connect and create the group; raises what tooz raises."""
        with self._lock:
            self._load_key()
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
                                statebus.redact(self.conf, exc))
                interval, failing = 1.0, True

    def encode(self, report):
        """The bytes :meth:`publish` puts on the bus for ``report``."""
        raw = self.codec.encode(report)
        if self._key:
            raw = signing.sign(self._key, self._group, raw)
        return raw

    def publish(self, report):
        """Encode, sign and publish ``report``.

        :raises HostClaimed: if another live client holds the member id.
        :raises mlaccel.statebus.keys.KeyFileError: for a bad key file.
        Otherwise raises what tooz raises.
        """
        if report.host != self.host:
            raise ValueError('report of host %r given to the publisher of %r'
                             % (report.host, self.host))
        self.start()
        raw = self.encode(report)
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
                # Checked before joining: a Redis join overwrites the
                # holder's report before it reports the conflict.
                self._replace_holder(coord)
                coord.join_group(self._group, raw).get()
            except coordination.MemberAlreadyExist:
                # Joined meanwhile by another client.
                self._replace_holder(coord)
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

    def _replace_holder(self, coord):
        """Remove the holder of our member id, if there is one and proof.

        :raises HostClaimed: without proof.
        """
        try:
            held = coord.get_member_capabilities(
                self._group, self.host.encode()).get()
        except coordination.MemberNotJoined:
            return  # nobody holds it
        reason = self._replaceable(held)
        if reason is None:
            raise HostClaimed(
                'another live client holds member %s of state bus group %s '
                'with a current %s this host\'s key does not prove to be '
                'its own; not replacing it' % (
                    self.host, self._group.decode(errors='replace'),
                    self.codec.kind))
        LOG.info('Replacing the state bus entry of %s: %s', self.host, reason)
        self._leave(coord)

    def _replaceable(self, held):
        """Why the holder's ``held`` report may be replaced, or ``None``."""
        if isinstance(held, str):
            held = held.encode('utf-8', 'surrogatepass')
        if not isinstance(held, bytes):
            return 'its report is not bytes'
        try:
            tag, body = signing.split(held)
            report = self.codec.decode(body)
        except ValueError:
            return 'its report is invalid'
        if report.host != self.host:
            return 'its report names another host'
        opts, age = self.conf.mlaccel_statebus, time.time() - report.timestamp
        if age > opts.report_max_age:
            return 'its report is stale'
        if -age > opts.max_clock_skew:
            return 'its report is dated in the future'
        if self._key:
            if tag is None:
                return 'its report is unsigned'
            try:
                signing.verify(self._key, self._group, held)
                return 'its report is signed with this host\'s key'
            except signing.BadSignature:
                pass
        return None

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
            statebus.stop_quietly(coord, self._group if joined else None,
                                  url=self.conf.mlaccel_statebus.backend_url)
