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

"""What the plugins need to know about one scheduling request, read once.

Nova filters, then weighs, the hosts for each instance of a request, in one
thread (or green thread). The BuildSlotFilter makes the view of the
instance, with the report it looked up for each host it kept, and hands it
on with :func:`share`; the LifecycleWeigher that weighs the same instance
next takes it with :func:`view` instead of reading the request and the
reports again. Without the filter the weigher makes its own.

Reports arrive every few seconds; a burst of requests comes faster. So the
builds sent to a host since the scheduler first used the host's current
report (:func:`placed_since`) count as builds in flight on top of the
report's own. Nova 34 makes its host states anew for each request, from
the compute node records: a request sees its own earlier instances at once,
and other requests' only once the compute has claimed them.
"""

import operator
import threading

from mlaccel import conf as mlaccel_conf
from mlaccel import costmodel
from mlaccel.scheduler import extra_specs
from mlaccel.scheduler import hostview


class RequestView:
    """One request as the mlaccel plugins see it.

    :ivar spec: the RequestSpec the view was made from.
    :ivar reports: a :class:`~mlaccel.scheduler.hostview.Snapshot` of the host
        reports; ``reports.get(host)`` is O(1) and ``None`` for a host with
        no fresh report.
    :ivar policy: the flavor's :class:`~mlaccel.scheduler.extra_specs.Policy`.
    :ivar start: the :class:`~mlaccel.costmodel.StartRequest`; its
        ``image_id`` is ``None`` for a volume-backed server.
    """

    __slots__ = ('spec', 'reports', 'policy', 'start', '_hosts',
                 '_host_reports', '_aggregated', '_queued', '_predicted')

    def __init__(self, spec_obj, conf=None):
        conf = conf or mlaccel_conf.CONF
        self.spec = spec_obj
        self.reports = hostview.get_cache(conf).snapshot()
        self.policy = extra_specs.policy(spec_obj)
        self._hosts = self._host_reports = self._aggregated = None
        self._queued = self._predicted = None
        image_id = image_size = None
        image = getattr(spec_obj, 'image', None)
        if image is not None:
            if image.obj_attr_is_set('id'):
                image_id = image.id
            if image.obj_attr_is_set('size'):
                image_size = image.size
        self.start = costmodel.StartRequest(image_id, image_size)

    def remember(self, hosts, host_reports, aggregated, queued):
        """Keep what one pass over ``hosts`` found.

        :param host_reports: the report (as its
            :class:`~mlaccel.scheduler.hostview.Entry`, or ``None``) of each
            host.
        :param aggregated: the positions of the hosts in an aggregate.
        :param queued: ``{position: builds}`` of the hosts to which this
            scheduler sent builds their reports may not count yet
            (:func:`placed_since`).
        """
        self._hosts = hosts
        self._host_reports, self._aggregated = host_reports, aggregated
        self._queued = queued
        self._predicted = None

    def reports_of(self, hosts):
        """``(reports, aggregated, queued)`` of ``hosts``, as remembered.

        Looked up again only when ``hosts`` are not the ones remembered:
        at ten thousand hosts, every pass over them costs memory traffic.
        """
        known = self._hosts
        if known is not None and len(known) == len(hosts) and all(
                map(operator.is_, hosts, known)):
            return self._host_reports, self._aggregated, self._queued
        get = self.reports.lookup()
        reports, aggregated, queued = [], [], {}
        for i, host_state in enumerate(hosts):
            report = get(host_state.host)
            reports.append(report)
            if report is not None:
                placed = placed_since(report, host_state)
                if placed:
                    queued[i] = placed
            if host_state.aggregates:
                aggregated.append(i)
        return reports, aggregated, queued

    def model(self, conf=None):
        """The :class:`~mlaccel.costmodel.CostModel` of this request.

        The refresh's own, whose unmeasured figures come from the other
        hosts' reports (:meth:`~mlaccel.costmodel.CostModel.with_peers`),
        unless the options changed since: then one of the options now.
        """
        model = costmodel.CostModel(conf or mlaccel_conf.CONF)
        known = self.reports.model
        if known is not None and known.options == model.options:
            return known
        return model

    def predict(self, hosts, model):
        """``(predicted seconds, image cached)`` of each of ``hosts``.

        Under :class:`~mlaccel.costmodel.CostModel` ``model``, the image
        counted only if the flavor's policy uses image locality. Worked out
        once for the remembered hosts; a second call returns the same lists.
        """
        known = self._predicted
        reports, _, queued = self.reports_of(hosts)
        if known is not None and known[0] == model and \
                reports is self._host_reports:
            return known[1], known[2]
        start = self.start
        if not self.policy.image_locality and start.image_id is not None:
            start = start._replace(image_id=None)
        local = []
        if self.reports.model == model:
            # The terms the report cache worked out with the same options,
            # and its index of the hosts caching each image; the few hosts
            # with builds their report does not count yet are predicted
            # again.
            predicted = model.seconds_of(
                reports, start, local, self.reports.holders(start.image_id))
            for i, builds in queued.items():
                predicted[i] = model.seconds(reports[i], start, builds)
        else:
            predicted = model.seconds_each(
                reports, start, [queued.get(i, 0) for i in range(len(hosts))],
                local)
        if reports is self._host_reports:
            self._predicted = (model, predicted, local)
        return predicted, local


def placed_since(entry, host_state):
    """Builds sent to the host since the scheduler first used ``entry``.

    A ``HostState``'s ``num_instances`` is the compute node record's count
    (instances the compute claimed; finished builds stay counted, unlike
    ``num_io_ops``), plus one for each instance of the request placed on
    the host so far. The count when the scheduler first uses a report is
    the report's baseline: instances added since are builds the report may
    not count yet, until the host's next report. (Nova 34 makes host states
    anew for each request: instances that other requests placed count from
    the compute's claim on, not from their placement.)
    A count below the baseline (a record after deletions) becomes the
    baseline. Called with the report's
    :class:`~mlaccel.scheduler.hostview.Entry` from the plugins' pass over the
    hosts; two threads setting the baseline at once set the same count.
    """
    count = host_state.num_instances
    seen = entry.instances_seen
    if seen is None or count < seen:
        entry.instances_seen = count
        return 0
    return count - seen


_shared = threading.local()


def share(request_view):
    """Hand ``request_view`` to the next :func:`view` of the same spec."""
    _shared.view = request_view


def view(spec_obj, conf=None):
    """The shared view of ``spec_obj``'s current instance, or a new one.

    A shared view is handed out once.
    """
    shared = getattr(_shared, 'view', None)
    if shared is not None:
        _shared.view = None
        if shared.spec is spec_obj:
            return shared
    return RequestView(spec_obj, conf)
