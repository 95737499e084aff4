"""Nova scheduler plugins: start each task VM where it will start soonest.

Nova loads filters and weighers by dotted path. The bridge functions
:func:`mlaccel.scheduler.filters.all_filters` and
:func:`mlaccel.scheduler.weights.all_weighers` hand it the classes
registered in mlaccel's own stevedore namespaces, so that nova.conf names a
stable function and the classes stay pluggable.
"""

from oslo_log import log as logging
from stevedore import extension

LOG = logging.getLogger(__name__)

FILTERS_NAMESPACE = 'mlaccel.scheduler.filters'
WEIGHERS_NAMESPACE = 'mlaccel.scheduler.weighers'


def load_classes(namespace):
    """Return the plugin classes registered in ``namespace``, by name."""
    def _failed(manager, entry_point, error):
        LOG.error('Could not load %(ep)s from %(ns)s: %(err)s',
                  {'ep': entry_point, 'ns': namespace, 'err': error})

    manager = extension.ExtensionManager(
        namespace, invoke_on_load=False,
        on_load_failure_callback=_failed)
    return [ext.plugin for ext in sorted(manager, key=lambda e: e.name)]
