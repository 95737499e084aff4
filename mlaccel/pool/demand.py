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

"""Demand for warm members: what every launch asked for, hit or miss.

Each launch that may claim members records its ask, whether a pool exists
for its key or not: the key, its spec (so a pool can be made for it
later), the VMs asked for and the members it got. A VM created fresh
because no member was there records its measured fresh overhead (create
request to warm daemon), the saving a member would have brought.

One document per project in the pool store's directory, kept like the
pools (private files, written under the store's lock on the state bus):
all launchers of a project write to the same one, so demand is recorded
once per cloud. Bounded by ``[mlaccel_pool] demand_records`` and
``demand_max_age``; it survives a manager's restart.

The same document keeps what the project's learned pools spent over the
last day: the members they hold (warm, or about to be built to their
target), written by the manager each round when the number changes, so
that a budget of idle VM-hours a day counts the day's member-seconds
(:func:`spent`), across restarts and whichever manager leads.
"""

import hashlib
import time

from oslo_log import log as logging

from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store

LOG = logging.getLogger(__name__)

SUFFIX = '.demand'
VERSION = 1
#: Weight of a new fresh-overhead sample in a key's moving average.
OVERHEAD_WEIGHT = 0.2
DAY = 86400.0

HIT, PARTIAL, MISS = 'hit', 'partial', 'miss'


def outcome(asked, claimed):
    """``hit`` (every VM from a pool), ``partial`` or ``miss`` (none)."""
    if claimed >= asked:
        return HIT
    return PARTIAL if claimed else MISS


def document_key(project_id):
    """The store key of a project's demand (any project id is safe)."""
    return hashlib.sha256(project_id.encode('utf-8')).hexdigest()[:32]


def empty(project_id):
    return {'version': VERSION, 'project_id': project_id, 'asks': [],
            'keys': {}}


def add_ask(doc, spec, asked, claimed, now):
    """Add to ``doc`` a launch that asked for ``asked`` VMs of ``spec``."""
    if asked < 1 or claimed < 0 or claimed > asked:
        raise ValueError('asked %r, claimed %r' % (asked, claimed))
    doc['asks'].append([now, spec.key, asked, claimed])
    entry = doc['keys'].setdefault(spec.key, {
        'spec': spec.to_dict(), 'fresh_overhead_s': None,
        'fresh_samples': 0})
    entry['spec'] = spec.to_dict()


def add_fresh(doc, key, samples):
    """Add to ``doc`` the fresh overheads (seconds) of VMs of ``key``.

    Each is a VM created because no member was there: its seconds from
    the create request to its warm daemon's readiness. A key with no ask
    kept has none.
    """
    samples = list(samples)
    if not all(s >= 0 for s in samples):
        raise ValueError('fresh overheads must be >= 0, got %r'
                         % (samples,))
    entry = doc['keys'].get(key)
    if entry is None:
        return
    for seconds in samples:
        old = entry['fresh_overhead_s']
        entry['fresh_overhead_s'] = seconds if old is None else (
            (1 - OVERHEAD_WEIGHT) * old + OVERHEAD_WEIGHT * seconds)
        entry['fresh_samples'] += 1


def add_spend(doc, now, members):
    """Record that the learned pools hold ``members`` from ``now`` on.

    Kept only when the number changes, for the last day.
    """
    if members < 0:
        raise ValueError('members must be >= 0, got %r' % (members,))
    spend = doc.setdefault('spend', [])
    if not spend or spend[-1][1] != members:
        spend.append([now, members])
    # The last change before the day began still holds at its start.
    old = sum(1 for t, _n in spend if t <= now - DAY)
    del spend[:max(0, old - 1)]


def holding(doc):
    """The members last recorded held (0 if none)."""
    spend = doc.get('spend') or []
    return spend[-1][1] if spend else 0


def spent(doc, now, window=DAY):
    """Member-seconds the learned pools held over ``window`` up to now.

    Each recorded number holds until the next one, the last one until now
    (while no manager records, whatever it held is counted held).
    """
    spend = doc.get('spend') or []
    begin, total = now - window, 0.0
    for (t, members), after in zip(spend, spend[1:] + [[now, 0]]):
        start, end = max(t, begin), min(after[0], now)
        if end > start:
            total += members * (end - start)
    return total


def leaving(doc, now, horizon, window=DAY):
    """``[(x, member-seconds)]``: what leaves the ``window`` as it moves.

    What of :func:`spent` (over the ``window`` up to ``now``) the window
    ending ``x`` seconds later no longer holds, for ``x`` at each recorded
    change in its first ``horizon`` seconds and at ``horizon``.
    """
    begin = now - window
    xs = {t - begin for t, _n in doc.get('spend') or ()
          if 0 < t - begin < horizon}
    return [(x, spent(doc, begin + x, window=x))
            for x in sorted(xs | {horizon})]


def prune(doc, now, max_records, max_age):
    """Keep ``doc``'s last ``max_records`` asks younger than ``max_age``."""
    asks = [a for a in doc['asks'] if now - a[0] <= max_age]
    doc['asks'] = asks[-max_records:]
    live = {a[1] for a in doc['asks']}
    doc['keys'] = {k: v for k, v in doc['keys'].items() if k in live}


def asks_by_key(doc):
    """``{key: [(time, VMs asked for)]}`` of ``doc``'s asks, oldest first."""
    asks = {}
    for t, key, vms, _claimed in doc['asks']:
        asks.setdefault(key, []).append((t, vms))
    return asks


def recorded_since(doc):
    """When ``doc``'s record begins: its oldest ask kept; None if none.

    Every key was watched from then on, asked for or not.
    """
    return min((t for t, _key, _vms, _claimed in doc['asks']), default=None)


def spec_of(doc, key):
    """The :class:`~mlaccel.pool.spec.PoolSpec` recorded for ``key``."""
    return pool_spec.PoolSpec.from_dict(doc['keys'][key]['spec'])


class DemandLog:
    """The demand records of every project in one pool store.

    :param store: the :class:`~mlaccel.pool.store.PoolStore`.
    :param max_records: the most asks kept per project (the oldest go).
    :param max_age: seconds an ask is kept.
    """

    def __init__(self, store, max_records=5000, max_age=8 * 86400.0):
        if max_records < 1 or max_age <= 0:
            raise ValueError('max_records and max_age must be positive')
        self.store = store
        self.max_records = max_records
        self.max_age = max_age

    @classmethod
    def from_conf(cls, store, conf):
        opts = conf.mlaccel_pool
        return cls(store, opts.demand_records, opts.demand_max_age)

    def _update(self, project_id, change, now):
        key = document_key(project_id)
        with self.store.transaction(key, create=empty(project_id),
                                    suffix=SUFFIX) as doc:
            if doc.get('version') != VERSION:
                LOG.warning('Demand of project %s had version %r; started '
                            'again', project_id, doc.get('version'))
                doc.clear()
                doc.update(empty(project_id))
            change(doc)
            prune(doc, now, self.max_records, self.max_age)

    def record_ask(self, spec, asked, claimed, now=None):
        """Record a launch that asked for ``asked`` VMs of ``spec``."""
        now = time.time() if now is None else now
        # A bad ask raises inside the transaction, which then writes nothing.
        self._update(spec.project_id,
                     lambda doc: add_ask(doc, spec, asked, claimed, now), now)

    def record_fresh(self, spec, samples, now=None):
        """Record the fresh overheads (seconds) of VMs of ``spec``."""
        now = time.time() if now is None else now
        samples = list(samples)
        self._update(spec.project_id,
                     lambda doc: add_fresh(doc, spec.key, samples), now)

    def record_spend(self, project_id, members, now=None):
        """Record the members the project's learned pools hold now."""
        now = time.time() if now is None else now
        self._update(project_id,
                     lambda doc: add_spend(doc, now, members), now)

    def read(self, project_id):
        """The project's demand document (no lock: a consistent copy)."""
        try:
            return self.store.read(document_key(project_id), SUFFIX)
        except pool_store.NoSuchPool:
            return empty(project_id)
