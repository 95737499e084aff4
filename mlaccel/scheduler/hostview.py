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

"""The scheduler's view of the host reports, worked out once per refresh.

The state bus's :class:`~mlaccel.statebus.reader.ReportCache` keeps every
host's valid report; :class:`HostReportCache` adds what the plugins read of
them on every request, made by the background refresh and never on the
request path: one compact :class:`Entry` per host with the cost model's
terms of its report, the index of the hosts caching each image, and the
oldest report's time, which lets a request skip the freshness check.
"""

import collections

from mlaccel import costmodel
from mlaccel.statebus import reader


class View(collections.namedtuple(
        'View', 'entries model oldest index peers stamps unmeasured')):
    """What one refresh derives of its reports, shared by its snapshots.

    ``entries``, ``model``, ``oldest`` and ``index`` are what the
    :class:`Snapshot` reads; ``peers`` (the hosts' measured figures,
    :class:`~mlaccel.costmodel.Peers`), ``stamps`` (``{host: timestamp}``)
    and ``unmeasured`` (the hosts whose entries depend on the peers) are
    what the next refresh starts from.
    """

    __slots__ = ()


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


def holders_index(entries, old_entries, old_index, hosts=None):
    """``{image id: frozenset of the entries caching it}`` of ``entries``.

    Worked out from ``old_index``, the index of ``old_entries``: only the
    entries that changed move (looked for among ``hosts`` if given, every
    host otherwise), and the sets of the images they name are copied, never
    changed in place (snapshots of the old refresh keep reading theirs).
    """
    changes = {}
    if hosts is None:
        hosts = set(old_entries).union(entries)
    for host in hosts:
        old, new = old_entries.get(host), entries.get(host)
        if old is new:
            continue
        if old is not None:
            for image in old.cached_images:
                changes.setdefault(image, ([], []))[0].append(old)
        if new is not None:
            for image in new.cached_images:
                changes.setdefault(image, ([], []))[1].append(new)
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


def _entry(host, report, model):
    # A new string per key, made here too: a lookup compares the key.
    host = host.encode('utf-8', 'surrogatepass').decode(
        'utf-8', 'surrogatepass')
    return Entry(host, report, model)


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
        else:
            entry = _entry(host, report, model)
            entries[entry.host] = entry
    return entries


def derive(conf, reports, previous=None, changed=None):
    """The :class:`View` of ``reports``, reusing the ``previous`` one.

    The cost model's unmeasured figures come from the hosts' own
    (:meth:`~mlaccel.costmodel.CostModel.with_peers`). When only those
    changed, the entries of reports that measured every figure themselves
    stay; when the options changed, every entry is made again. Given
    ``changed``, the hosts whose reports may differ from ``previous``'s
    (all others are the same objects), the work is in proportion to them
    and to the hosts that measured nothing yet, not to every host.
    """
    base = costmodel.CostModel(conf)
    if previous is None or changed is None or \
            previous.model.options != base.options:
        return _derive_all(reports, previous, base)
    old_entries = previous.entries
    moved = []
    peers = None
    for host in dict.fromkeys(changed):   # each once, in order
        old, report = old_entries.get(host), reports.get(host)
        if old is None and report is None or \
                old is not None and old.report is report:
            continue
        if peers is None:
            peers = previous.peers.copy()
        if old is not None:
            peers.remove(old.report)
        if report is not None:
            peers.add(report)
        moved.append(host)
    if not moved:
        return previous
    model = peers.model(base)
    entries, stamps = dict(old_entries), dict(previous.stamps)
    unmeasured = set(previous.unmeasured)
    for host in moved:
        report = reports.get(host)
        entries.pop(host, None)
        stamps.pop(host, None)
        unmeasured.discard(host)
        if report is None:
            continue
        entry = _entry(host, report, model)
        entries[entry.host], stamps[entry.host] = entry, entry.timestamp
        if not model.measured(report):
            unmeasured.add(entry.host)
    if model != previous.model:
        # Their terms come from the peers' medians, which moved.
        for host in unmeasured.difference(moved):
            entry = entries[host] = _entry(host, reports[host], model)
            moved.append(entry.host)
    index = holders_index(entries, old_entries, previous.index, moved)
    return View(entries, model, min(stamps.values(), default=None), index,
                peers, stamps, frozenset(unmeasured))


def _derive_all(reports, previous, base):
    """:func:`derive`, looking at every report."""
    peers = costmodel.Peers(reports.values())
    model = peers.model(base)
    old_entries = previous.entries if previous else {}
    old_model = previous.model if previous else None
    old, keep = old_entries, None
    if old_model != model:
        if old_model is not None and old_model.options == model.options:
            keep = model.measured
        else:
            old = None
    entries = entries_of(reports, old, model, keep)
    index = holders_index(entries, old_entries,
                          previous.index if previous else {})
    stamps = {host: entry.timestamp for host, entry in entries.items()}
    unmeasured = frozenset(host for host, entry in entries.items()
                           if not model.measured(entry.report))
    return View(entries, model, min(stamps.values(), default=None), index,
                peers, stamps, unmeasured)


class Snapshot(reader.Snapshot):
    """The reports as of one refresh, with the scheduler's view of them.

    :ivar entries: ``{host: Entry}`` of every report, fresh or not.
    :ivar model: the :class:`~mlaccel.costmodel.CostModel` whose terms the
        entries hold, or ``None``.
    :ivar oldest: the oldest timestamp of the entries, or ``None`` if not
        known.
    """

    __slots__ = ('entries', 'model', 'oldest', '_index')

    def __init__(self, reports, now, max_age, view=None):
        super().__init__(reports, now, max_age)
        if view is None:
            # Made from reports alone (a test, a tool): no terms, no
            # shortcut; the index is made when first asked for.
            self.entries, self.model = entries_of(reports), None
            self.oldest = self._index = None
        else:
            self.entries, self.model = view.entries, view.model
            self.oldest, self._index = view.oldest, view.index

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


class HostReportCache(reader.ReportCache):
    """The host reports' cache whose snapshots carry the scheduler's view."""

    def _derive(self, reports, previous, changed=None):
        return derive(self.conf, reports, previous, changed)

    def _snapshot(self, reports, now, max_age, derived):
        return Snapshot(reports, now, max_age, derived)


def get_cache(conf=None):
    """The process-wide :class:`HostReportCache` the plugins read."""
    return reader.process_cache(HostReportCache, conf)
