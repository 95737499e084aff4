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

"""Functional tests of the mirror-volume driver on Cinder's own in-process
harness (``cinder.tests.functional``).

Cinder's concurrency mode is chosen once per process from
``OS_CINDER_DISABLE_EVENTLET_PATCHING`` ("1": native threads; "0":
eventlet), the way ``cinder.tests.functional`` does it; it must agree with
``OS_NOVA_DISABLE_EVENTLET_PATCHING``, which the parent package applies.
Run the suite once per value.

Cinder and Nova cannot share a process (both register
``[DEFAULT] default_availability_zone``, differently), while a run of the
whole functional suite imports every module into each worker. So these
tests are skipped unless ``MLACCEL_FUNCTIONAL_CINDER=1``; they run on their
own test path, as ``tools/functional.sh`` runs them::

    tox -e functional -- functional-cinder [FILTER]

In native-thread mode Nova forbids importing eventlet at all (an import
hook), while Cinder 29 still imports it, unpatched, in that mode too. The
hook is lifted here so both can share a test process; Cinder's own guard
(``eventlet.monkey_patch`` poisoned) still stops any patching.
"""

# autopep8: off
import os  # noqa: E402
import sys  # noqa: E402
import unittest  # noqa: E402

if os.environ.get('MLACCEL_FUNCTIONAL_CINDER') != '1':
    raise unittest.SkipTest('Cinder functional tests run on their own: set '
                            'MLACCEL_FUNCTIONAL_CINDER=1')
sys.meta_path[:] = [f for f in sys.meta_path
                    if type(f).__name__ != 'PoisonEventletImport']
from cinder import monkey_patch; monkey_patch.patch()  # noqa: E402,E702
# autopep8: on
from cinder import objects  # noqa: E402

objects.register_all()
