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

The scheduler plugins never touch the bus themselves: they take one
:class:`Snapshot` per request and look hosts up in it, O(1) each. A
background thread replaces the cache every ``refresh_interval`` seconds with
one ``get_members_with_capabilities`` call. When the bus cannot be read the
cache empties, so the plugins fall back to stock behaviour at once. A read
of an unreachable Redis can take tooz about a minute of retries to fail;
until then the reports already held expire by their own timestamps after
``report_max_age`` seconds.
"""

import os
import socket
import threading
import time

from oslo_log import log as logging
from tooz import coordination

from mlaccel import conf as mlaccel_conf
from mlaccel import costmodel
from mlaccel import statebus
from mlaccel.statebus import codec as bus_codec
from mlaccel.statebus import keys
from mlaccel.statebus import signing

LOG = logging.getLogger(__name__)


class Entry:
    """What the scheduler reads of one host's report, in one small object.

    A refresh makes the entries of the reports it changed one after the
    other, so that entries sit together in memory: at ten thousand hosts a
    request touches one compact object per host instead of several objects
    per report, scattered across the heap by the decoding.
    Attributes are those of the :class:`~mlaccel.hostreport.HostReport`
    (``report``) that the cost model reads, plus what a request needs of
    the report worked out once: ``free``, the build slots its own limit
    leaves (infinite without a limit), and ``per_byte`` and ``fixed``, the
    report's :class:`~mlaccel.costmodel.Terms` under ``model`` (``None``
    without one), flat on the entry so that a request reads one object per
    host. ``instances_seen`` is left to the scheduler plugins: the host's
    instance count in Nova when they first used the entry
    (:func:`mlaccel.scheduler.request.placed_since`).
    """

    __slots__ = ('host', 'timestamp', 'build_limit', 'builds_in_flight',
                 'cached_images', 'fetch_bandwidth', 'build_throughput',
                 'free', 'per_byte', 'fixed', 'report', 'instances_seen')

    def __init__(self, host, report, model=None):
        # Fresh copies (``x + 0.0``, a new frozenset), made in one burst
        # with the entry itself.
        self.host = host
        self.timestamp = report.timestamp + 0.0
        self.build_limit = report.build_limit
        self.builds_in_flight = report.builds_in_flight
        self.cached_images = frozenset(tuple(report.cached_images))
        self.fetch_bandwidth = report.fetch_bandwidth + 0.0
        self.build_throughput = report.build_throughput + 0.0
        limit = report.build_limit
        self.free = limit - report.builds_in_flight if limit > 0 \
            else float('inf')
        if model is None:
            self.per_byte = self.fixed = None
        else:
            _, self.per_byte, self.fixed = model.terms(self)
        self.report = report
        self.instances_seen = None


def holders_index(entries, old_entries, old_index):
    """``{image id: frozenset of the entries caching it}`` of ``entries``.

    Worked out from ``old_index``, the index of ``old_entries``: only the
    entries that changed move, and the sets of the images they name are
    copied, never changed in place (snapshots of the old refresh keep
    reading theirs). Values that are not an :class:`Entry` are left out.
    """
    changes = {}
    for host, entry in old_entries.items():
        if type(entry) is Entry and entries.get(host) is not entry:
            for image in entry.cached_images:
                changes.setdefault(image, ([], []))[0].append(entry)
    for host, entry in entries.items():
        if type(entry) is Entry and old_entries.get(host) is not entry:
            for image in entry.cached_images:
                changes.setdefault(image, ([], []))[1].append(entry)
    if not changes:
        return old_index
    index = dict(old_index)
    for image, (gone, added) in changes.items():
        holders = old_index.get(image, frozenset()).difference(
            gone).union(added)
        if holders:
            index[image] = holders
        else:
            index.pop(image, None)
    return index


def entries_of(reports, old=None, model=None, keep=None):
    """``{host: Entry}`` of ``{host: HostReport}``.

    The entry of an unchanged report is taken from ``old`` (entries made
    with the same ``model``, or whose terms ``keep(entry)`` says are the
    same under it); the others are made in one burst.
    """
    entries = {}
    old = old or {}
    for host, report in reports.items():
        entry = old.get(host)
        if entry is not None and entry.report is report and (
                keep is None or keep(entry)):
            entries[entry.host] = entry
            continue
        # A new string per key, made here too: a lookup compares the key.
        host = host.encode('utf-8', 'surrogatepass').decode(
            'utf-8', 'surrogatepass')
        entries[host] = Entry(host, report, model)
    return entries


class Snapshot:
    """The reports as of one refresh, judged fresh against one clock read.

    :ivar model: the :class:`~mlaccel.costmodel.CostModel` whose terms the
        entries hold, or ``None``.
    :ivar oldest: the oldest timestamp of the entries, or ``None`` if not
        known.
    """

    __slots__ = ('reports', 'entries', 'now', 'max_age', 'model', 'oldest',
                 '_index')

    def __init__(self, reports, now, max_age, entries=None, model=None,
                 oldest=None, index=None):
        self.reports = reports
        self.entries = entries_of(reports) if entries is None else entries
        self.now = now
        self.max_age = max_age
        self.model = model if entries is not None else None
        self.oldest = oldest if entries is not None else None
        self._index = index if entries is not None else None

    def holders(self, image_id):
        """The entries (fresh or not) whose report lists ``image_id``."""
        if self._index is None:
            self._index = holders_index(self.entries, {}, {})
        return self._index.get(image_id, frozenset())

    def lookup(self):
        """A function like :meth:`entry`, the fastest that is right now.

        When the oldest report is fresh, every report is: a plain dict
        lookup per host then does.
        """
        if self.oldest is not None and self.now - self.oldest <= self.max_age:
            return self.entries.get
        return self.entry

    def get(self, host):
        """The host's report, or ``None`` if it has none or it is stale."""
        entry = self.entry(host)
        return None if entry is None else entry.report

    def entry(self, host):
        """The host's :class:`Entry`, or ``None`` (no fresh report)."""
        entry = self.entries.get(host)
        if entry is None or self.now - entry.timestamp > self.max_age:
            return None
        return entry

    def __len__(self):
        return len(self.reports)


class ReportCache:
    """Every host's latest valid report, kept by a background thread.

    :param conf: a ``ConfigOpts`` with ``[mlaccel_statebus]``.
    :param codec: decodes reports (default: host reports,
        :class:`~mlaccel.statebus.codec.HostReportCodec`).
    :param group: tooz group name (default ``[mlaccel_statebus] group``).

    With ``[mlaccel_statebus] deployment_key_file`` set, only reports
    signed with the key of the host they name are used; signatures are
    checked by the refresh, once per changed report, never per request.
    A rejected report is logged (each member at most once a minute) and
    the member's last valid report stays in use until it goes stale.
    """

    #: Seconds between two log lines about one member's rejected reports.
    REJECT_LOG_INTERVAL = 60.0
    #: Rejections logged one by one per refresh; the rest are counted.
    REJECT_LOG_LINES = 10

    def __init__(self, conf=None, codec=None, group=None):
        self.conf = conf or mlaccel_conf.CONF
        self._opts = self.conf.mlaccel_statebus
        self.codec = codec or bus_codec.HostReportCodec.from_conf(self.conf)
        self._group = (group.encode() if group is not None
                       else statebus.group_id(self.conf))
        self._verifier = None
        self._key_error = None
        # (reports, entries, cost model of their terms, oldest timestamp,
        # holders index) of the last refresh, swapped as one.
        self._state = ({}, {}, None, None, {})
        self._model = None
        self._accepted = {}
        self._rejected = {}
        self._logged = {}
        self._coordinator = None
        self._thread = None
        self._stop = threading.Event()
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
        reports, entries, model, oldest, index = self._state
        return Snapshot(reports, time.time() if now is None else now,
                        self._opts.report_max_age, entries, model, oldest,
                        index)

    def start(self):
        """Start the refresh thread if it is not running (thread-safe)."""
        if self._thread is not None and self._thread.is_alive():
            return
        with self._refreshed:
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(
                    target=self._run, name='mlaccel-statebus-reader',
                    daemon=True)
                self._thread.start()

    def stop(self):
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._thread = None
        self._disconnect()

    def wait_for_refresh(self, count=1, timeout=None):
        """Block until ``count`` more refreshes have finished.

        For tests and tools; returns whether they did within ``timeout``.
        """
        with self._refreshed:
            target = self.refreshes + count
            return self._refreshed.wait_for(
                lambda: self.refreshes >= target, timeout)

    def _run(self):
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self._opts.refresh_interval)

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
            members = self._read_members()
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
            self.load(members)

    def _clear(self):
        self._state = ({}, {}, None, None, {})
        self._accepted, self._rejected = {}, {}

    def _load_key(self):
        if self._verifier is not None:
            return
        path = self._opts.deployment_key_file
        secret = keys.read_deployment_key(path) if path else None
        if secret is None:
            LOG.warning('State bus reports are not authenticated: without '
                        '[mlaccel_statebus] deployment_key_file any client '
                        'of the bus can publish a report for any host.')
        if self._key_error is not None:
            LOG.info('State bus report signatures are checked again.')
            self._key_error = None
        self._verifier = signing.Verifier(secret, self._group)

    def _read_members(self):
        if self._coordinator is None:
            member = 'reader-%s-%d' % (socket.gethostname(), os.getpid())
            try:
                coord = statebus.coordinator(self.conf, member,
                                             read_only=True)
            except statebus.NoBus:
                return {}
            coord.start(start_heart=False)
            self._coordinator = coord
        try:
            return self._coordinator.get_members_with_capabilities(
                self._group).get()
        except coordination.GroupNotCreated:
            return {}

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

    def _load(self, members, now):
        if self._verifier is None:
            self._load_key()
        old_reports, old_accepted = self._state[0], self._accepted
        old_rejected = self._rejected
        reports, accepted, rejected, logged = {}, {}, {}, {}
        rejections = []
        for member, raw in members.items():
            source = member.decode(errors='replace') \
                if isinstance(member, bytes) else str(member)
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
        for source in rejected:
            if source in self._logged:
                logged[source] = self._logged[source]
        self._log_rejections(rejections, logged, now)
        # Swapped by reference: readers hold whole, consistent dicts.
        self._accepted, self._rejected = accepted, rejected
        model = self._model_of(reports)
        old, old_model = self._state[1], self._state[2]
        keep = None
        if old_model != model:
            if model is not None and old_model is not None and \
                    old_model.options == model.options:
                # Only what the peers measured changed: the entries of
                # reports that measured every figure themselves stay.
                keep = model.measured
            else:
                old = None
        self._model = model
        entries = self._entries(reports, old, keep)
        index = holders_index(entries, self._state[1], self._state[4])
        self._state = (reports, entries, model, min(
            (entry.timestamp for entry in entries.values()), default=None),
            index)
        self._logged = logged

    def _model_of(self, reports):
        """The cost model of the entries' terms, given ``reports``.

        Unmeasured figures come from the hosts' own
        (:meth:`~mlaccel.costmodel.CostModel.with_peers`). Another kind of
        report's cache may return ``None``.
        """
        return costmodel.CostModel(self.conf).with_peers(reports.values())

    def _entries(self, reports, old, keep=None):
        """What a snapshot looks hosts up in.

        Another kind of report's cache may return ``reports`` themselves
        (they have ``timestamp``). ``old`` holds the last refresh's
        entries, or ``None`` when the cost model changed since; ``keep``
        is as for :func:`entries_of`.
        """
        return entries_of(reports, old, self._model, keep)

    def _check(self, source, raw, now):
        """The report in ``raw`` from member ``source``, or ValueError."""
        if isinstance(raw, str):
            raw = raw.encode('utf-8', 'surrogatepass')
        if not isinstance(raw, bytes):
            raise ValueError('report is a %s, not bytes'
                             % type(raw).__name__)
        body = self._verifier.body(raw, source)
        report = self.codec.decode(body)
        if report.host != source:
            raise ValueError('it names host %s' % report.host)
        ahead = report.timestamp - now
        if ahead > self._opts.max_clock_skew:
            raise ValueError('it is dated %.1f s in the future, more than '
                             'max_clock_skew (%s s)'
                             % (ahead, self._opts.max_clock_skew))
        return report

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
        if coord is not None:
            statebus.stop_quietly(coord, url=self._opts.backend_url)


_cache = None
_cache_pid = None
_cache_lock = threading.Lock()


def get_cache(conf=None):
    """The process-wide cache; a forked child gets its own."""
    global _cache, _cache_pid
    pid = os.getpid()
    if _cache is None or _cache_pid != pid:
        with _cache_lock:
            if _cache is None or _cache_pid != pid:
                _cache, _cache_pid = ReportCache(conf), pid
    return _cache
