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
from mlaccel import hostreport
from mlaccel import statebus

LOG = logging.getLogger(__name__)


class Snapshot:
    """The reports as of one refresh, judged fresh against one clock read."""

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
    """Every host's latest valid report, kept by a background thread."""

    def __init__(self, conf=None):
        self.conf = conf or mlaccel_conf.CONF
        self._opts = self.conf.mlaccel_statebus
        self._reports = {}
        self._raw = {}
        self._coordinator = None
        self._thread = None
        self._stop = threading.Event()
        self._refreshed = threading.Condition()
        self._refreshing = threading.Lock()
        self.refreshes = 0
        self.healthy = None
        self.last_refresh_seconds = None

    def snapshot(self, now=None):
        """The current reports; the background thread starts if needed."""
        self.start()
        return Snapshot(self._reports, time.time() if now is None else now,
                        self._opts.report_max_age)

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

    def _refresh(self):
        started = time.perf_counter()
        try:
            members = self._read_members()
        except Exception as exc:
            if self.healthy is not False:
                LOG.warning('State bus %s unreadable, scheduling without host '
                            'reports until it answers: %s',
                            self._opts.backend_url, exc)
            self.healthy = False
            # Kept connected: the client reconnects by itself when the bus
            # answers again, and stopping it could block for a minute.
            self._reports, self._raw = {}, {}
        else:
            if self.healthy is False:
                LOG.info('State bus %s answers again.', self._opts.backend_url)
            self.healthy = True
            self.load(members)
        self.last_refresh_seconds = time.perf_counter() - started
        with self._refreshed:
            self.refreshes += 1
            self._refreshed.notify_all()

    def _read_members(self):
        if self._coordinator is None:
            member = 'reader-%s-%d' % (socket.gethostname(), os.getpid())
            coord = statebus.coordinator(self.conf, member)
            coord.start(start_heart=False)
            self._coordinator = coord
        try:
            return self._coordinator.get_members_with_capabilities(
                statebus.group_id(self.conf)).get()
        except coordination.GroupNotCreated:
            return {}

    def load(self, members):
        """Replace the cache's reports with ``members``, as a refresh does.

        :param members: ``{member id: raw report}`` as tooz returns them.
            Reports whose bytes did not change since the last load are kept
            without decoding them again; invalid ones are logged and dropped.
        """
        old_raw, old_reports = self._raw, self._reports
        raw_by_host, reports = {}, {}
        for member, raw in members.items():
            source = member.decode(errors='replace') \
                if isinstance(member, bytes) else str(member)
            if raw is None:
                continue
            raw_by_host[source] = raw
            if old_raw.get(source) == raw and source in old_reports:
                reports[source] = old_reports[source]
                continue
            report = hostreport.decode(
                raw, source, self._opts.max_report_bytes,
                self._opts.max_cached_images)
            if report is None:
                continue
            if report.host != source:
                LOG.warning('Rejected host report from %(source)s: it names '
                            'host %(host)s', {'source': source,
                                              'host': report.host})
                continue
            reports[report.host] = report
        # Swapped by reference: readers hold whole, consistent dicts.
        self._raw, self._reports = raw_by_host, reports

    def _disconnect(self):
        coord, self._coordinator = self._coordinator, None
        if coord is not None:
            statebus.stop_quietly(coord)


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
