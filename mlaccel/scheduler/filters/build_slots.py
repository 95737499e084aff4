"""Keep new builds off hosts whose build slots are all taken."""

import threading

from nova.scheduler import filters
from nova.scheduler.filters import utils as filter_utils
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel.scheduler import request

LOG = logging.getLogger(__name__)

AGGREGATE_KEY = 'mlaccel_max_builds_per_host'


def _nothing_placed(host_state):
    return 0


def _instances(spec_obj):
    try:
        return spec_obj.num_instances
    except (AttributeError, NotImplementedError):
        return 1


class BuildSlotFilter(filters.BaseHostFilter):
    """Reject a host whose builds in flight reached its adaptive limit.

    The limit is the one the host's agent adapts to measured build latency
    (the "dynamic parallel parameter"), capped by ``[mlaccel_scheduler]
    max_builds_per_host`` or the aggregate metadata
    ``mlaccel_max_builds_per_host``. Builds in flight are the report's count
    plus the instances this scheduler placed on the host earlier in the same
    request, so a burst spreads. (Nova's ``num_io_ops`` alone would not do:
    it keeps counting finished builds until the compute's next periodic
    update.) A host without a fresh report passes unless
    ``build_slot_fail_open`` is false.
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
        view = request.RequestView(spec_obj, self.conf)
        if not view.policy.build_slots:
            return hosts
        placed = self._placed_in_request(hosts, spec_obj)
        opts = self.conf.mlaccel_scheduler
        cap, fail_open = opts.max_builds_per_host, opts.build_slot_fail_open
        get, passes = view.reports.get, self._passes
        return [h for h in hosts
                if passes(h, get(h.host), placed(h), cap, fail_open)]

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))

    def _placed_in_request(self, hosts, spec_obj):
        """Return ``host_state -> instances placed there in this request``.

        Nova adds one to a host's ``num_io_ops`` for each instance it places
        there while scheduling a request; the difference to the value seen
        at the request's first instance is what this request placed.
        """
        state = self._request
        index, state.index = getattr(state, 'index', None), None
        if index is None or (index == 0 and _instances(spec_obj) <= 1):
            return _nothing_placed
        if index == 0:
            state.baseline = {id(h): h.num_io_ops for h in hosts}
            return _nothing_placed
        baseline = getattr(state, 'baseline', {})
        return lambda h: h.num_io_ops - baseline.get(id(h), h.num_io_ops)

    @staticmethod
    def _passes(host_state, report, placed, cap, fail_open):
        if report is None:
            return fail_open
        limit = report.build_limit
        if host_state.aggregates:
            values = filter_utils.aggregate_values_from_key(host_state,
                                                            AGGREGATE_KEY)
            try:
                cap = filter_utils.validate_num_values(values, cap,
                                                       cast_to=int,
                                                       based_on=min)
            except ValueError as exc:
                LOG.warning('Ignored bad aggregate value of %s: %s',
                            AGGREGATE_KEY, exc)
        if cap > 0:
            limit = min(limit, cap) if limit > 0 else cap
        if limit <= 0:
            return True
        in_flight = report.builds_in_flight + placed
        if in_flight < limit:
            return True
        LOG.debug('%(host)s has %(n)d builds in flight, its limit is '
                  '%(limit)d', {'host': host_state.host, 'n': in_flight,
                                'limit': limit})
        return False
