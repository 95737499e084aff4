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
