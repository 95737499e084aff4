"""Keep new builds off hosts whose build slots are all taken."""

from nova.scheduler import filters
from nova.scheduler.filters import utils as filter_utils
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel.scheduler import request

LOG = logging.getLogger(__name__)

AGGREGATE_KEY = 'mlaccel_max_builds_per_host'


class BuildSlotFilter(filters.BaseHostFilter):
    """Reject a host whose builds in flight reached its adaptive limit.

    The limit is the one the host's agent adapts to measured build latency
    (the "dynamic parallel parameter"), capped by ``[mlaccel_scheduler]
    max_builds_per_host`` or the aggregate metadata
    ``mlaccel_max_builds_per_host``. Builds in flight are the larger of the
    report's count and Nova's own ``num_io_ops``, which also counts the
    instances this scheduler placed earlier in the same request, so a burst
    spreads. A host without a fresh report passes unless
    ``build_slot_fail_open`` is false.
    """

    RUN_ON_REBUILD = False

    def __init__(self):
        super().__init__()
        self.conf = mlaccel_conf.CONF

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        view = request.RequestView(spec_obj, self.conf)
        if not view.policy.build_slots:
            return hosts
        opts = self.conf.mlaccel_scheduler
        cap, fail_open = opts.max_builds_per_host, opts.build_slot_fail_open
        get, passes = view.reports.get, self._passes
        return [h for h in hosts if passes(h, get(h.host), cap, fail_open)]

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))

    @staticmethod
    def _passes(host_state, report, cap, fail_open):
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
        in_flight = max(report.builds_in_flight, host_state.num_io_ops)
        if in_flight < limit:
            return True
        LOG.debug('%(host)s has %(n)d builds in flight, its limit is '
                  '%(limit)d', {'host': host_state.host, 'n': in_flight,
                                'limit': limit})
        return False
