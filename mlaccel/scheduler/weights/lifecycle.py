"""Prefer the host that will start the task soonest."""

from mlaccel import costmodel
from mlaccel.scheduler.weights import base


class LifecycleWeigher(base.RequestWeigher):
    """Weight: minus the cost model's predicted seconds to task start.

    The prediction covers image transfer (none when cached), the build
    queued behind the host's builds in flight at its measured throughput,
    and a warm task-daemon fork or a cold start. Hosts without a fresh
    report are predicted from ``[mlaccel_costmodel]`` defaults; when no host
    has one, every host weighs the same and stock weighers decide.
    """

    MULTIPLIER_OPT = 'lifecycle_weight_multiplier'

    def weigh_hosts(self, hosts, view):
        model = costmodel.CostModel(self.conf)
        get = view.reports.get
        start = view.start
        if not view.policy.image_locality:
            start = start._replace(image_id=None)
        return [-model.seconds(get(h.host), start) for h in hosts]
