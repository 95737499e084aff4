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

"""Prefer the host that will start the task soonest."""

from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights

from mlaccel import conf as mlaccel_conf
from mlaccel.scheduler import request

LOCALITY_KEY = 'mlaccel_image_locality_weight_multiplier'
LIFECYCLE_KEY = 'mlaccel_lifecycle_weight_multiplier'


class LifecycleWeigher(weights.BaseHostWeigher):
    """Two terms, weighed in one pass over the hosts of a request.

    *Predicted start*: minus the cost model's seconds to task start (image
    transfer, none when cached; the build queued behind the host's builds in
    flight and the scheduler's placements there since its report, at its
    measured throughput; a cold start), times
    ``lifecycle_weight_multiplier``. A figure a host has not measured yet is
    predicted from what the other hosts measured, or from
    ``[mlaccel_costmodel]`` defaults when none did; a host without a fresh
    report is predicted from the defaults. When no host has a report, every
    host weighs the same and stock weighers decide.

    *Image locality*: 1 for a host that holds the image, 0 for one that
    does not, times ``image_locality_weight_multiplier``. A host's report
    says what its image cache holds; a host without a fresh report counts as
    holding the image when an instance of it runs there, judged only from
    instances Nova already loaded in full (a stub would lazy-load
    ``image_ref`` with one database query per instance).

    Each term is normalised to 0..1 over the hosts and multiplied by its
    multiplier (per-aggregate overrides included), exactly as Nova does per
    weigher; the sum is handed to Nova with ``minval``/``maxval`` pinned so
    that Nova's own normalisation leaves it as it is. One weigher instead of
    two halves Nova's fixed per-host cost of a weigher.
    """

    minval = 0.0
    maxval = 1.0

    def __init__(self):
        super().__init__()
        self.conf = mlaccel_conf.CONF
        # host -> (instances dict id, its size, frozenset of image refs):
        # the walk over a host's instances is redone only when they change.
        self._images_by_host = {}

    def weigh_objects(self, weighed_obj_list, spec_obj):
        return self.weigh_hosts([obj.obj for obj in weighed_obj_list],
                                request.view(spec_obj, self.conf))

    def _weigh_object(self, host_state, spec_obj):
        return self.weigh_hosts([host_state],
                                request.view(spec_obj, self.conf))[0]

    def weigh_hosts(self, hosts, view):
        """Return one weight per host, higher is better."""
        opts = self.conf.mlaccel_scheduler
        locality = opts.image_locality_weight_multiplier
        lifecycle = opts.lifecycle_weight_multiplier
        image_id = view.start.image_id if view.policy.image_locality \
            else None
        reports, aggregated, _ = view.reports_of(hosts)
        predicted, local = view.predict(hosts, view.model(self.conf))
        # Nova's normalisation: (w - min) / (max - min), 0 if all equal.
        latest = max(predicted)
        spread = latest - min(predicted)
        scale = lifecycle / spread if spread else 0.0
        if image_id is not None and locality:
            if None in reports:
                # Without a report: the images of the instances running.
                running = self._running_images
                local = list(local)  # the view's own stays as it was
                for i, report in enumerate(reports):
                    if report is None:
                        local[i] = image_id in running(hosts[i])
            if all(local) or not any(local):
                local = None  # normalised to 0 on every host
        else:
            local = None
        if local is None:
            weights_ = [scale * (latest - s) for s in predicted]
        else:
            weights_ = [scale * (latest - s) + locality if is_local
                        else scale * (latest - s)
                        for s, is_local in zip(predicted, local)]
        for i in aggregated:
            host_state = hosts[i]
            loc = scheduler_utils.get_weight_multiplier(
                host_state, LOCALITY_KEY, locality)
            life = scheduler_utils.get_weight_multiplier(
                host_state, LIFECYCLE_KEY, lifecycle)
            weight = life / spread * (latest - predicted[i]) \
                if spread else 0.0
            if local is not None and local[i]:
                weight += loc
            weights_[i] = weight
        return weights_

    def _running_images(self, host_state):
        instances = host_state.instances
        key = (id(instances), len(instances))
        cached = self._images_by_host.get(host_state.host)
        if cached is not None and cached[0] == key:
            return cached[1]
        images = frozenset(
            inst.image_ref for inst in list(instances.values())
            if inst.obj_attr_is_set('image_ref') and inst.image_ref)
        self._images_by_host[host_state.host] = (key, images)
        return images
