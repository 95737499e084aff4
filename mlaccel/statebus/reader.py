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

"""An in-memory cache of every host's report, refreshed in the background.

Its readers never touch the bus on their request path: they take a
:class:`Snapshot` and look reports up in it, O(1) each. What a reader works
out of the reports once per refresh (the scheduler's view,
:mod:`mlaccel.scheduler.hostview`) it adds in a subclass. A background
thread refreshes the cache every ``refresh_interval`` seconds, fetching
only the reports that changed (:mod:`mlaccel.statebus.drivers`; every
report at first, every :data:`~mlaccel.statebus.drivers.FULL_READ_INTERVAL`
seconds and when a member left). When the bus cannot be read the
cache empties, so the plugins fall back to stock behaviour at once. A read
of an unreachable Redis can take tooz about a minute of retries to fail;
until then the reports already held expire by their own timestamps after
``report_max_age`` seconds.

A host's report is used only if it is newer than the last one the cache
accepted of that host: by its signed sequence number, or by its timestamp
for reports without one (signed by an older publisher, or unsigned). So a
client of the bus cannot put a host's older report back.
"""

import hashlib
import os
import socket
import threading
import time

from oslo_log import log as logging
from tooz import coordination

from mlaccel import conf as mlaccel_conf
from mlaccel import periodic
from mlaccel import statebus
from mlaccel.statebus import codec as bus_codec
from mlaccel.statebus import drivers
from mlaccel.statebus import keys
from mlaccel.statebus import signing

LOG = logging.getLogger(__name__)


class Snapshot:
    """The reports as of one refresh, judged fresh against one clock read.

    :ivar reports: ``{host: report}`` of every valid report, fresh or not.
    """

    __slots__ = ('reports', 'now', 'max_age')

    def __init__(self, reports, now, max_age):
        self.reports = reports
        self.now = now
        self.max_age = max_age

    def get(self, host):
        """The host's report, or ``None`` if it has none or it is stale."""
        report = self.reports.get(host)
        if report is None or self.now - report.timestamp > self.max_age:
            return None
        return report

    def __len__(self):
        return len(self.reports)


class ReportCache:
    """Every host's latest valid report, kept by a background thread.

    :param conf: a ``ConfigOpts`` with ``[mlaccel_statebus]``.
    :param codec: decodes reports (default: host reports,
        :class:`~mlaccel.statebus.codec.HostReportCodec`).
    :param group: tooz group name (default ``[mlaccel_statebus] group``).

    Only reports signed with a key of ``[mlaccel_statebus]
    deployment_key_file`` for the host they name are used (all reports,
    unverified, without that file and with ``allow_unsigned_reports``;
    none otherwise), each newer than the last one accepted of its host.
    Signatures are checked by the refresh, once per changed report, never
    per request; the key file is read again when it changes. A rejected
    report is logged (each member at most once a minute) and the member's
    last valid report stays in use until it goes stale.

    :ivar replays_rejected: how many reports were rejected as not newer
        than the last one accepted of their host.
    """

    #: Seconds between two log lines about one member's rejected reports.
    REJECT_LOG_INTERVAL = 60.0
    #: Rejections logged one by one per refresh; the rest are counted.
    REJECT_LOG_LINES = 10
    #: Seconds between two reads of every report (a member that left is
    #: dropped then); in between a refresh reads only what changed.
    FULL_READ_INTERVAL = drivers.FULL_READ_INTERVAL

    def __init__(self, conf=None, codec=None, group=None):
        self.conf = conf or mlaccel_conf.CONF
        self._opts = self.conf.mlaccel_statebus
        self.codec = codec or bus_codec.HostReportCodec.from_conf(self.conf)
        self._group = (group.encode() if group is not None
                       else statebus.group_id(self.conf))
        self._verifier = None
        self._key_error = None
        self._key_stamp = None
        self._recheck = False
        # {host: ((1, sequence) or (0, timestamp), digest, key id)} of the
        # newest report accepted of each host. Kept while the process
        # lives, whatever the bus holds: a host whose entry was deleted
        # cannot be rolled back either.
        self._newest = {}
        self.replays_rejected = 0
        # (reports, what a subclass derived of them) of the last refresh,
        # swapped as one.
        self._state = ({}, None)
        self._accepted = {}
        self._rejected = {}
        self._logged = {}
        self._coordinator = None
        self._changes = None
        self._full_read_at = None
        #: Refreshes that read every report, and those that read changes.
        self.full_reads = self.partial_reads = 0
        self._loop = periodic.Periodic(
            'mlaccel-statebus-reader', lambda: self._opts.refresh_interval,
            self.refresh)
        self._refreshed = threading.Condition()
        self._refreshing = threading.RLock()
        self.refreshes = 0
        self.healthy = None
        #: Why the last refresh failed (secrets masked), or ``None``.
        self.last_error = None
        self.last_refresh_seconds = None

    def snapshot(self, now=None):
        """The current reports; the background thread starts if needed."""
        self.start()
        return self.current(now)

    def current(self, now=None):
        """The reports as of the last refresh, starting no thread."""
        reports, derived = self._state
        return self._snapshot(reports, time.time() if now is None else now,
                              self._opts.report_max_age, derived)

    def start(self):
        """Start the refresh thread if it is not running (thread-safe)."""
        if not self._loop.running:
            self._loop.start()

    def stop(self):
        self._loop.stop()
        self._disconnect()

    def wait_for_refresh(self, count=1, timeout=None):
        """Block until ``count`` more refreshes have finished.

        For tests and tools; returns whether they did within ``timeout``.
        """
        with self._refreshed:
            target = self.refreshes + count
            return self._refreshed.wait_for(
                lambda: self.refreshes >= target, timeout)

    def refresh(self):
        """Read every report once and swap them in; never raises."""
        with self._refreshing:
            self._refresh()

    @property
    def authenticated(self):
        """Whether reports are checked against a deployment key."""
        return self._verifier is not None and self._verifier.authenticated

    def _refresh(self):
        started = time.perf_counter()
        try:
            self._load_key()
        except keys.KeyFileError as exc:
            if str(exc) != self._key_error:
                LOG.error('Cannot check state bus report signatures, '
                          'scheduling without host reports: %s', exc)
            self._key_error = self.last_error = str(exc)
            self.healthy = False
            self._clear()
        else:
            self._read_and_load()
        self.last_refresh_seconds = time.perf_counter() - started
        with self._refreshed:
            self.refreshes += 1
            self._refreshed.notify_all()

    def _read_and_load(self):
        try:
            members, partial = self._read()
        except Exception as exc:
            self.last_error = statebus.redact(self.conf, exc)
            if self.healthy is not False:
                LOG.warning('State bus %s unreadable, scheduling without '
                            'host reports until it answers: %s',
                            statebus.safe_url(self.conf), self.last_error)
            self.healthy = False
            # Kept connected: the client reconnects by itself when the bus
            # answers again, and stopping it could block for a minute.
            self._clear()
        else:
            if self.healthy is False:
                LOG.info('State bus %s answers again.',
                         statebus.safe_url(self.conf))
            self.healthy, self.last_error = True, None
            with self._refreshing:
                self._load(members, time.time(), partial)

    def _clear(self):
        self._full_read_at = None
        self._state = ({}, None)
        self._accepted, self._rejected = {}, {}

    def _load_key(self):
        """Read the deployment keys, at first and when their file changed."""
        path = self._opts.deployment_key_file
        stamp = _stamp(path)
        if self._verifier is not None and stamp == self._key_stamp:
            return
        self._verifier = None
        self._verifier = signing.Verifier(self._deployment_keys(path),
                                          self._group)
        self._key_stamp = stamp
        # Every report is checked again under the keys read now.
        self._recheck = True
        if self._key_error is not None:
            LOG.info('State bus report signatures are checked again.')
            self._key_error = None

    def _deployment_keys(self, path):
        if path:
            return keys.read_deployment_keys(path)
        if not self._opts.allow_unsigned_reports:
            raise keys.KeyFileError(
                'no [mlaccel_statebus] deployment_key_file, so no report can '
                'be authenticated and none is used (allow_unsigned_reports '
                'is for test clouds only)')
        LOG.warning('INSECURE: [mlaccel_statebus] allow_unsigned_reports is '
                    'set and there is no deployment_key_file: state bus '
                    'reports are not authenticated, and any client of the '
                    'bus can publish a report for any host.')
        return None

    def key_id(self, host):
        """The key id of ``host``'s newest accepted report, or ``None``."""
        newest = self._newest.get(host)
        return None if newest is None else newest[2]

    def _read(self):
        """``(members, partial)``: every report, or only those changed.

        Only what changed is read while the driver can tell
        (:mod:`mlaccel.statebus.drivers`), the keys did not change and a
        full read is less than ``FULL_READ_INTERVAL`` seconds old.
        """
        if self._changes is None:
            member = 'reader-%s-%d' % (socket.gethostname(), os.getpid())
            try:
                coord = statebus.coordinator(self.conf, member,
                                             read_only=True)
            except statebus.NoBus:
                return {}, False
            statebus.start(coord)
            self._coordinator = coord
            self._changes = drivers.for_client(coord, self._group)
        now = time.monotonic()
        if not self._recheck and self._full_read_at is not None and \
                now - self._full_read_at < self.FULL_READ_INTERVAL:
            try:
                changed = self._changes.read_changed()
            except coordination.GroupNotCreated:
                changed = None
            if changed is not None:
                self.partial_reads += 1
                return changed, True
        self._full_read_at = None
        try:
            members = self._changes.read_all()
        except coordination.GroupNotCreated:
            members = {}
        self._full_read_at = now
        self.full_reads += 1
        return members, False

    def load(self, members, now=None):
        """Replace the cache's reports with ``members``, as a refresh does.

        :param members: ``{member id: raw report}`` as tooz returns them.
            Reports whose bytes did not change since the last load are kept
            without checking them again; invalid ones are logged and
            dropped, and the member's previous valid report is kept.
        :param now: the reader's clock, for the future-date check.
        """
        with self._refreshing:
            self._load(members, time.time() if now is None else now)

    def _load(self, members, now, partial=False):
        """Load ``members``: all of them, or only those changed.

        With ``partial``, a member absent from ``members`` keeps what it
        had and one mapped to ``None`` is dropped; without, ``members`` is
        the whole group.
        """
        if self._verifier is None:
            self._load_key()
        if partial and not members:
            return
        old_reports, old_accepted = self._state[0], self._accepted
        # The hosts whose reports may change, if not every host.
        changed = []
        if self._recheck:
            old_reports, old_accepted, self._rejected = {}, {}, {}
            self._recheck, changed = False, None
        if not partial:
            changed = None
        old_rejected = self._rejected
        if partial:
            reports, accepted = dict(old_reports), dict(old_accepted)
            rejected, logged = dict(old_rejected), dict(self._logged)
        else:
            reports, accepted, rejected, logged = {}, {}, {}, {}
        rejections = []
        for member, raw in members.items():
            source = member.decode(errors='replace') \
                if isinstance(member, bytes) else str(member)
            if partial:
                for held in (reports, accepted, rejected, logged):
                    held.pop(source, None)
            if changed is not None:
                changed.append(source)
            if raw is None:
                continue
            if old_accepted.get(source) == raw:
                reports[source] = old_reports[source]
                accepted[source] = raw
                continue
            if old_rejected.get(source) != raw:
                try:
                    report = self._check(source, raw, now)
                except ValueError as exc:
                    rejections.append((source, exc))
                else:
                    reports[source], accepted[source] = report, raw
                    continue
            rejected[source] = raw
            if source in old_reports:
                reports[source] = old_reports[source]
                accepted[source] = old_accepted[source]
            if source in self._logged:
                logged[source] = self._logged[source]
        self._log_rejections(rejections, logged, now)
        # Swapped by reference: readers hold whole, consistent dicts.
        self._accepted, self._rejected = accepted, rejected
        self._state = (reports, self._derive(reports, self._state[1],
                                             changed))
        self._logged = logged

    def _derive(self, reports, previous, changed=None):
        """What every snapshot of ``reports`` shares, worked out once.

        Called by each load with the reports it accepted, what the last
        load derived (``previous``, ``None`` at first or after the bus was
        unreadable) and the hosts whose reports may differ from the last
        load's (``changed``; ``None``: any host). A subclass that reads
        more into the reports than :class:`Snapshot` does returns it here;
        this class derives nothing.
        """
        return None

    def _snapshot(self, reports, now, max_age, derived):
        """The snapshot of one load's ``reports`` and ``derived``."""
        return Snapshot(reports, now, max_age)

    def _check(self, source, raw, now):
        """The report in ``raw`` from member ``source``, or ValueError."""
        if isinstance(raw, str):
            raw = raw.encode('utf-8', 'surrogatepass')
        if not isinstance(raw, bytes):
            raise ValueError('report is a %s, not bytes'
                             % type(raw).__name__)
        signed = self._verifier.check(raw, source)
        report = self.codec.decode(signed.body)
        if report.host != source:
            raise ValueError('it names host %s' % report.host)
        ahead = report.timestamp - now
        if ahead > self._opts.max_clock_skew:
            raise ValueError('it is dated %.1f s in the future, more than '
                             'max_clock_skew (%s s)'
                             % (ahead, self._opts.max_clock_skew))
        self._check_newer(source, signed, report, raw)
        return report

    def _check_newer(self, source, signed, report, raw):
        """Record ``source``'s report as its newest, or ValueError.

        The newest report itself may come back (a file bus member leaves
        and joins again to update); it expires by its timestamp as ever.
        """
        order = (0, report.timestamp) if signed.sequence is None \
            else (1, signed.sequence)
        digest = hashlib.sha256(raw).digest()
        newest = self._newest.get(source)
        if newest is not None and (order, digest) != newest[:2] and \
                order <= newest[0]:
            self.replays_rejected += 1
            raise ValueError(
                'it is not newer than the last report accepted of this '
                'host (%s %s, last %s): a replayed or rolled-back report'
                % (_ORDER_NAMES[order[0]], order[1], newest[0][1]))
        self._newest[source] = (order, digest, signed.key_id)

    def _log_rejections(self, rejections, logged, now):
        shown = hidden = 0
        for source, exc in rejections:
            if now - logged.get(source, -1e300) < self.REJECT_LOG_INTERVAL:
                continue
            if shown >= self.REJECT_LOG_LINES:
                hidden += 1
                continue
            LOG.warning('Rejected %(kind)s from %(source)s: %(reason)s',
                        {'kind': self.codec.kind, 'source': source,
                         'reason': exc})
            logged[source] = now
            shown += 1
        if hidden:
            LOG.warning('Rejected %(count)d more %(kind)ss.',
                        {'count': hidden, 'kind': self.codec.kind})

    def _disconnect(self):
        coord, self._coordinator = self._coordinator, None
        self._changes, self._full_read_at = None, None
        if coord is not None:
            statebus.stop_quietly(coord, url=self._opts.backend_url)


_ORDER_NAMES = ('timestamp', 'sequence number')


def _stamp(path):
    """What tells that the file ``path`` changed, or ``None``."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return st and (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


_caches = {}
_caches_lock = threading.Lock()


def process_cache(cls=ReportCache, conf=None):
    """The process-wide ``cls`` cache; a forked child gets its own.

    One per class: the scheduler's view of host reports, the Cinder
    weigher's backend reports and a plain reader each keep their own.
    """
    pid = os.getpid()
    held = _caches.get(cls)
    if held is None or held[0] != pid:
        with _caches_lock:
            held = _caches.get(cls)
            if held is None or held[0] != pid:
                held = _caches[cls] = (pid, cls(conf))
    return held[1]


def get_cache(conf=None):
    """The process-wide cache of host reports, as plain reports."""
    return process_cache(ReportCache, conf)
