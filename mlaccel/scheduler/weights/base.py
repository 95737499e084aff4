"""What mlaccel's weighers share: config multipliers with per-aggregate
overrides, and weighing every host of a request in one pass."""

from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights

from mlaccel import conf as mlaccel_conf
from mlaccel.scheduler import request


class RequestWeigher(weights.BaseHostWeigher):
    """A weigher that reads the request once, then weighs hosts in O(1).

    Subclasses name their multiplier option (in ``[mlaccel_scheduler]``;
    the aggregate metadata key is the same name prefixed with ``mlaccel_``)
    and implement :meth:`weigh_hosts`.
    """

    MULTIPLIER_OPT = None

    def __init__(self):
        super().__init__()
        self.conf = mlaccel_conf.CONF
        self._aggregate_key = 'mlaccel_' + self.MULTIPLIER_OPT
        self._multiplier = self._configured_multiplier()

    def _configured_multiplier(self):
        return getattr(self.conf.mlaccel_scheduler, self.MULTIPLIER_OPT)

    def weight_multiplier(self, host_state):
        # Nova asks once per host: the option is read once per request, in
        # weigh_objects (every request sees the same value, so concurrent
        # requests may share the attribute).
        if not host_state.aggregates:
            return self._multiplier
        return scheduler_utils.get_weight_multiplier(
            host_state, self._aggregate_key, self._multiplier)

    def weigh_objects(self, weighed_obj_list, spec_obj):
        self._multiplier = self._configured_multiplier()
        hosts = [obj.obj for obj in weighed_obj_list]
        return self.weigh_hosts(hosts, request.RequestView(spec_obj,
                                                           self.conf))

    def weigh_hosts(self, hosts, view):
        """Return one weight per host, higher is better."""
        raise NotImplementedError()

    def _weigh_object(self, host_state, spec_obj):
        return self.weigh_hosts([host_state],
                                request.RequestView(spec_obj, self.conf))[0]
