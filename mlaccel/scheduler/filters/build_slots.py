# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Steer new builds away from hosts whose build slots are all taken."""

import threading

from nova.scheduler import filters
from nova.scheduler.filters import utils as filter_utils
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel.scheduler import request

LOG = logging.getLogger(__name__)

AGGREGATE_KEY = 'mlaccel_max_builds_per_host'
UNLIMITED = float('inf')


def _instances(spec_obj):
    try:
        return spec_obj.num_instances
    except (AttributeError, NotImplementedError):
        return 1


class BuildSlotFilter(filters.BaseHostFilter):
    """Steer new builds away from hosts whose build slots are all taken.

    A host is full when its builds in flight reached its adaptive limit,
    the one its agent adapts to measured build latency (the "dynamic
    parallel parameter"), capped by ``[mlaccel_scheduler]
    max_builds_per_host`` or the aggregate metadata
    ``mlaccel_max_builds_per_host``. Builds in flight are the report's count
    plus the instances placed on the host since the scheduler first used
    that report (:func:`mlaccel.scheduler.request.placed_since`): this
    request's at once, earlier requests' once the compute claimed them
    (Nova 34 makes host states anew per request), so a burst spreads before
    the next reports arrive. (Nova's ``num_io_ops`` alone would not do: it
    keeps counting finished builds until the compute's next periodic
    update.) A host without a fresh report passes unless
    ``build_slot_fail_open`` is false.

    The limit steers, it never refuses a boot: full hosts are dropped only
    while the free slots of the others can take every instance of the
    request still to place. Otherwise every candidate is kept, builds queue
    on the computes as they would without mlaccel, and the LifecycleWeigher
    sends each to the host predicted to start it soonest (counting this
    request's earlier placements).
    """

    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        self.conf = mlaccel_conf.CONF
        # Nova schedules all instances of one request in one thread (or
        # green thread), telling each filter the instance's index first.
        self._request = threading.local()

    def run_filter_for_index(self, index):
        self._request.index = index
        return True

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        to_place = self._to_place(spec_obj)
        view = request.RequestView(spec_obj, self.conf)
        request.share(view)
        if not view.policy.build_slots or not hosts:
            return hosts
        kept, reports, aggregated, queued, slots = self._free(hosts, view)
        if slots >= to_place:
            view.remember(kept, reports, aggregated, queued)
            return kept
        # Nova filters each instance of a request from the hosts kept for
        # the one before: dropping a full host now would refuse the
        # instances that the free slots cannot take.
        LOG.info('%(n)d instance(s) to place, %(slots)d free build slot(s) '
                 'on %(hosts)d candidate host(s): keeping every candidate, '
                 'builds queue where they are predicted to start soonest.',
                 {'n': to_place, 'slots': slots, 'hosts': len(hosts)})
        return hosts

    def host_passes(self, host_state, spec_obj):
        """Whether the host has a free build slot (or passes unreported).

        Judged alone, so a full host fails here: only :meth:`filter_all`
        knows whether every candidate is full.
        """
        if scheduler_utils.request_is_rebuild(spec_obj):
            return True
        view = request.RequestView(spec_obj, self.conf)
        return not view.policy.build_slots or bool(
            self._free([host_state], view)[0])

    def _free(self, hosts, view):
        """``(hosts, reports, aggregated, queued, free slots)`` passing.

        A host passes with a build slot left, or without a limit, or without
        a report if ``build_slot_fail_open``. ``reports`` holds each passing
        host's report (as its :class:`~mlaccel.scheduler.hostview.Entry`),
        ``aggregated`` the positions of those in an aggregate, ``queued``
        ``{position: builds}`` of those with builds sent since their report
        (:func:`~mlaccel.scheduler.request.placed_since`), and the free
        slots are those of the passing hosts, infinite if one has no limit.
        """
        opts = self.conf.mlaccel_scheduler
        cap, fail_open = opts.max_builds_per_host, opts.build_slot_fail_open
        get = view.reports.lookup()
        kept, reports, aggregated, queued, slots = [], [], [], {}, 0
        keep, keep_report = kept.append, reports.append
        for host_state in hosts:
            report = get(host_state.host)
            in_aggregate = bool(host_state.aggregates)
            if report is None:
                if fail_open:
                    if in_aggregate:
                        aggregated.append(len(kept))
                    keep(host_state)
                    keep_report(None)
                    slots = UNLIMITED
                continue
            # request.placed_since, inlined: this loop runs for every host.
            count, seen = host_state.num_instances, report.instances_seen
            if seen is None or count < seen:
                report.instances_seen = seen = count
            if not (count > seen or cap > 0 or in_aggregate):
                # Without a cap or builds sent since the report, a host
                # outside aggregates has the free slots its limit leaves.
                free = report.free
                if free > 0:
                    keep(host_state)
                    keep_report(report)
                    slots += free
                    continue
                limit, in_flight = report.build_limit, report.builds_in_flight
            else:
                limit = report.build_limit
                if in_aggregate:
                    limit = self._capped(host_state, limit, cap)
                elif cap > 0 and not 0 < limit <= cap:
                    limit = cap
                in_flight = report.builds_in_flight
                if count > seen:
                    in_flight += count - seen
                if limit <= 0 or in_flight < limit:
                    if in_aggregate:
                        aggregated.append(len(kept))
                    if count > seen:
                        queued[len(kept)] = count - seen
                    keep(host_state)
                    keep_report(report)
                    slots = UNLIMITED if limit <= 0 \
                        else slots + limit - in_flight
                    continue
            LOG.debug('%(host)s has %(n)d builds in flight, its limit '
                      'is %(limit)d', {'host': host_state.host,
                                       'n': in_flight, 'limit': limit})
        return kept, reports, aggregated, queued, slots

    def _to_place(self, spec_obj):
        """Instances of the request still to place, this one included."""
        state = self._request
        index, state.index = getattr(state, 'index', None), None
        count = _instances(spec_obj)
        if index is None or count <= 1:
            return 1
        return max(count - index, 1)

    @staticmethod
    def _capped(host_state, limit, cap):
        """The host's limit, capped by config and its aggregates."""
        values = filter_utils.aggregate_values_from_key(host_state,
                                                        AGGREGATE_KEY)
        try:
            cap = filter_utils.validate_num_values(values, cap, cast_to=int,
                                                   based_on=min)
        except ValueError as exc:
            LOG.warning('Ignored bad aggregate value of %s: %s',
                        AGGREGATE_KEY, exc)
        if cap > 0 and not 0 < limit <= cap:
            return cap
        return limit
