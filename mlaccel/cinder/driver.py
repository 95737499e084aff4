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

"""The mirror-volume driver: a real backend driver plus golden volumes.

Set ``volume_driver = mlaccel.cinder.driver.MirrorVolumeDriver`` in a
backend section and name the real driver with ``mlaccel_backend_driver``
(or ``[mlaccel_cinder] backend_driver``). Cinder's create-from-image flow
calls ``clone_image`` first; the backend's own ``clone_image`` is tried
first (a backend that clones from Glance natively keeps doing so), then the
mirror's, which returns ``(model_update, True)`` after cloning the image's
golden volume, so neither Cinder's built-in cache nor a download runs.
Everything else is the backend's.

Composition, not a mixin: the volume manager only calls the driver's
methods and reads a few attributes (``configuration``, ``capabilities``,
``SUPPORTS_ACTIVE_ACTIVE``, ``initialized``), which a proxy forwards;
nothing in Cinder tests ``isinstance`` on drivers, and
:class:`cinder.volume.driver.ProxyVD` is Cinder's own marker for proxies
(``_get_driver()`` gives the real one). A mixin would need a class built at
run time from the backend class, could not wrap drivers that are factories
(NetApp's ``NetAppDriver`` returns another object from ``__new__``), and
would share one attribute namespace with every backend's, where one clash
silently breaks the backend. The proxy keeps the backend object untouched
and its own state apart.
"""

from eventlet import tpool
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import importutils

from cinder import exception
from cinder import monkey_patch
from cinder.volume import driver

from mlaccel.cinder import mirror
from mlaccel import conf as mlaccel_conf

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def backend_class(configuration):
    """The real driver class a backend section names."""
    mlaccel_conf.register_opts(CONF)
    configuration.append_config_values(mlaccel_conf.cinder.BACKEND_OPTS)
    path = (configuration.safe_get('mlaccel_backend_driver')
            or CONF.mlaccel_cinder.backend_driver)
    if not path:
        raise exception.InvalidConfigurationValue(
            option='mlaccel_backend_driver', value=path)
    if path.startswith('mlaccel.cinder.driver.'):
        raise exception.InvalidConfigurationValue(
            option='mlaccel_backend_driver (cannot wrap itself)', value=path)
    return importutils.import_class(path)


def _host(kwargs):
    return kwargs.get('host') or CONF.host


class MirrorVolumeDriver(driver.ProxyVD):
    """A backend driver whose ``clone_image`` clones golden volumes."""

    VERSION = '1.0.0'

    def __init__(self, *args, **kwargs):
        self.driver = backend_class(kwargs['configuration'])(*args, **kwargs)
        self.mirror = mirror.Mirror(self.driver, _host(kwargs),
                                    CONF.mlaccel_cinder)

    def __getattr__(self, name):
        if name in ('driver', 'mirror'):
            raise AttributeError(name)
        return getattr(self.driver, name)

    def do_setup(self, context):
        self.driver.do_setup(context)
        _native_threads_tpool()
        self.mirror.start()

    def clone_image(self, context, volume, image_location, image_meta,
                    image_service):
        update, cloned = self.driver.clone_image(
            context, volume, image_location, image_meta, image_service)
        if cloned:
            return update, cloned
        return self.mirror.clone_image(context, volume, image_meta,
                                       image_service)

    def delete_volume(self, volume):
        self.mirror.forget_volume(volume.id)
        return self.driver.delete_volume(volume)

    def get_volume_stats(self, refresh=False):
        stats = dict(self.driver.get_volume_stats(refresh) or {})
        stats['mlaccel_mirror'] = True
        stats['mlaccel_golden_images'] = len(self.mirror.cache.entries())
        return stats


def _native_threads_tpool():
    """On native threads, run Cinder's tpool calls in the caller's thread.

    Cinder 29 sizes eventlet's tpool only when monkey patched; left at its
    default, tpool serves one native thread's hub only, and an image fetch
    (``tpool.Proxy`` around the file) from a second thread never returns.
    Golden volumes are filled from any RPC worker thread.
    """
    if not monkey_patch.is_patched():
        tpool.set_num_threads(0)
