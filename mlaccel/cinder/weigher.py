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

"""Cinder scheduler weigher: the backend holding the image's golden volume.

Enable it by name in cinder-scheduler's ``scheduler_default_weighers``
(``CapacityWeigher,GoldenImageWeigher``); it is in Cinder's
``cinder.scheduler.weights`` entry-point namespace. For a request to create
a volume from an image, a backend whose report on the state bus (published
by the mirror-volume driver, :mod:`mlaccel.cinder.publish`) lists the image
among its golden images weighs 1, every other backend 0; other requests
weigh 0 everywhere. Reports are read by a background thread into memory
(:mod:`mlaccel.statebus.reader`): weighing asks no database and no bus. A
stale or missing report counts as holding nothing.
"""


from oslo_config import cfg

from cinder.scheduler import weights
from cinder.volume import volume_utils

from mlaccel.cinder import backendreport
from mlaccel import conf as mlaccel_conf
from mlaccel.statebus import reader

CONF = cfg.CONF
mlaccel_conf.register_opts(CONF)


class BackendReportCache(reader.ReportCache):
    """The report cache of backend reports.

    A snapshot maps each backend (``host@backend``) to its
    :class:`~mlaccel.cinder.backendreport.BackendReport`.
    """

    def __init__(self, conf=None):
        conf = conf or CONF
        super().__init__(conf, codec=backendreport.BackendReportCodec(),
                         group=conf.mlaccel_cinder.report_group)


def get_cache():
    """The process-wide cache of backend reports."""
    return reader.process_cache(BackendReportCache)


def image_id(weight_properties):
    spec = weight_properties.get('request_spec') or {}
    return spec.get('image_id')


class GoldenImageWeigher(weights.BaseHostWeigher):
    """Prefer backends holding the requested image's golden volume."""

    minval = 0.0
    maxval = 1.0

    def weight_multiplier(self):
        return CONF.mlaccel_cinder.golden_weight_multiplier

    def weigh_objects(self, weighed_obj_list, weight_properties):
        image = image_id(weight_properties)
        if not image:
            return [0.0] * len(weighed_obj_list)
        snapshot = get_cache().snapshot()
        weights_ = []
        for weighed in weighed_obj_list:
            held = snapshot.get(
                volume_utils.extract_host(weighed.obj.host, 'backend'))
            weights_.append(
                1.0 if held is not None and image in held.golden_images
                else 0.0)
        return weights_

    def _weigh_object(self, host_state, weight_properties):
        return self.weigh_objects(
            [weights.WeighedHost(host_state, 0.0)], weight_properties)[0]
