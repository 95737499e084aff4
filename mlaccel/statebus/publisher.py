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
from mlaccel import periodic
from mlaccel import statebus
from mlaccel.statebus import codec as bus_codec
from mlaccel.statebus import drivers
from mlaccel.statebus import keys
from mlaccel.statebus import sequence
from mlaccel.statebus import signing

LOG = logging.getLogger(__name__)

# What tooz raises when the bus no longer holds our group or membership.
_LOST = (coordination.GroupNotCreated, coordination.MemberNotJoined)


class HostClaimed(Exception):
    """Another live client holds this host's member id on the bus."""


def host_keys_of(conf, host):
    """``host``'s keys in ``[mlaccel_statebus] host_key_file``, current first.

    ``[]`` (reports go unsigned) only without a key file and with
    ``allow_unsigned_reports``, which is logged as a warning.

    :raises mlaccel.statebus.keys.KeyFileError: with the reason.
    """
    opts = conf.mlaccel_statebus
    if not opts.host_key_file:
        if not opts.allow_unsigned_reports:
            raise keys.KeyFileError(
                'no [mlaccel_statebus] host_key_file: the reports of %s are '
                'not published (readers would reject them unsigned)' % host)
        LOG.warning('INSECURE: [mlaccel_statebus] allow_unsigned_reports is '
                    'set and there is no host_key_file: the reports of %s '
                    'go unsigned, and any client of the bus can publish '
                    'reports in its name.', host)
        return []
    found = [k for k in keys.read_host_keys(opts.host_key_file)
             if k.host in (None, host)]
    if not found:
        raise keys.KeyFileError(
            'host key file %s holds no key of host %s; make it with '
            '"mlaccel-statebus derive --host %s"'
            % (opts.host_key_file, host, host))
    return found


class Publisher:
    """Keeps one host's report on the bus as its group capabilities.

    :param host: the name reports speak for; also the member id.
    :param conf: a ``ConfigOpts`` with ``[mlaccel_statebus]``.
    :param codec: encodes reports (default: host reports,
        :class:`~mlaccel.statebus.codec.HostReportCodec`).
    :param group: tooz group name (default ``[mlaccel_statebus] group``).
    :param host_keys: this host's
        :class:`~mlaccel.statebus.keys.HostKey` list, the one to sign with
        first; default: :func:`host_keys_of`; ``[]``: reports go unsigned.

    Every signed report carries the next number of the host's
    :class:`~mlaccel.statebus.sequence.Sequence`, kept in
    ``[mlaccel_statebus] publisher_state_dir``.

    The member id is the host name. A member already there is replaced only
    with proof that it is this host's own earlier agent or useless to
    readers: its report verifies with one of this host's keys, or is unsigned
    while
    this publisher signs, or is invalid, stale or dated in the future.
    Otherwise :meth:`publish` raises :class:`HostClaimed` and the holder
    stays.

    Every write is announced to readers the way the backend needs
    (:mod:`mlaccel.statebus.drivers`), so that they fetch only what changed.

    Thread-safe; :meth:`publish` may be called from any thread. Liveness
    heartbeats run in a thread of our own rather than tooz's, whose
    heartbeat retries an unreachable backend for ever and so would never
    let :meth:`stop` return.
    """

    def __init__(self, host, conf=None, codec=None, group=None,
                 host_keys=None):
        self.host = host
        self.conf = conf or mlaccel_conf.CONF
        self.codec = codec or bus_codec.HostReportCodec.from_conf(self.conf)
        self._group = (group.encode() if group is not None
                       else statebus.group_id(self.conf))
        self._keys = host_keys
        self._sequence = None
        self._lock = threading.Lock()
        self._coordinator = None
        self._changes = None
        self._joined = False
        self._heart = None
        self._beat_interval, self._beat_failing = 1.0, False

    def _load_keys(self):
        if self._keys is None:
            self._keys = host_keys_of(self.conf, self.host)
        if self._keys and self._sequence is None:
            self._sequence = sequence.Sequence(sequence.path_of(
                self.conf.mlaccel_statebus.publisher_state_dir,
                self._group.decode(), self.host))

    def start(self):
        """Connect and create the group; raises what tooz raises."""
        with self._lock:
            self._load_keys()
            if self._coordinator is None:
                coord = statebus.coordinator(self.conf, self.host)
                statebus.start(coord)
                self._coordinator = coord
                self._changes = drivers.for_client(coord, self._group)
                try:
                    coord.create_group(self._group).get()
                except coordination.GroupAlreadyExist:
                    pass
                self._beat_interval, self._beat_failing = 1.0, False
                self._heart = periodic.Periodic(
                    'mlaccel-statebus-heartbeat',
                    lambda: self._beat_interval,
                    lambda: self._beat(coord), initial_delay=1.0)
                self._heart.start()

    def _beat(self, coord):
        try:
            # tooz answers with the seconds until the next one is due.
            self._beat_interval = min(max(coord.heartbeat() or 1.0, 0.5),
                                      10.0)
            if self._beat_failing:
                LOG.info('State bus heartbeats go through again.')
            self._beat_failing = False
        except Exception as exc:
            if not self._beat_failing:
                LOG.warning('State bus heartbeat failed, retrying: %s',
                            statebus.redact(self.conf, exc))
            self._beat_interval, self._beat_failing = 1.0, True

    def encode(self, report):
        """The bytes :meth:`publish` puts on the bus for ``report``.

        Each call takes the next sequence number; call :meth:`start` first.
        """
        raw = self.codec.encode(report)
        if self._keys:
            raw = signing.sign(self._keys[0], self._group,
                               self._sequence.next(), raw)
        return raw

    def publish(self, report):
        """Encode, sign and publish ``report``.

        :raises HostClaimed: if another live client holds the member id.
        :raises mlaccel.statebus.keys.KeyFileError: for a bad or missing
            key file.
        :raises mlaccel.statebus.sequence.SequenceError: if the sequence
            number cannot be kept.
        Otherwise raises what tooz raises.
        """
        if report.host != self.host:
            raise ValueError('report of host %r given to the publisher of %r'
                             % (report.host, self.host))
        self.start()
        with self._lock:
            # Numbered under the lock: reports reach the bus in order.
            raw = self.encode(report)
            coord = self._coordinator
            if self._joined:
                try:
                    coord.update_capabilities(self._group, raw).get()
                    self._changes.announce(self.host.encode())
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
            self._changes.announce(self.host.encode())

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
            signed = signing.split(held)
            report = self.codec.decode(signed.body)
        except ValueError:
            return 'its report is invalid'
        if report.host != self.host:
            return 'its report names another host'
        opts, age = self.conf.mlaccel_statebus, time.time() - report.timestamp
        if age > opts.report_max_age:
            return 'its report is stale'
        if -age > opts.max_clock_skew:
            return 'its report is dated in the future'
        if self._keys:
            if signed.version is None:
                return 'its report is unsigned'
            if any(signing.verifies(signed, self._group, k.key)
                   for k in self._keys):
                return 'its report is signed with this host\'s key'
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
        heart, self._heart = self._heart, None
        if heart is not None:
            heart.stop(statebus.STOP_TIMEOUT)
        with self._lock:
            coord, self._coordinator = self._coordinator, None
            joined, self._joined = self._joined, False
        if coord is not None:
            statebus.stop_quietly(coord, self._group if joined else None,
                                  url=self.conf.mlaccel_statebus.backend_url)
