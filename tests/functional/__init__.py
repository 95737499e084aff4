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

"""Functional tests, run in-process on Nova's own harness.

Nova's concurrency mode is chosen once per process, at import time, from
``OS_NOVA_DISABLE_EVENTLET_PATCHING`` ("1": native threads; unset or "0":
eventlet). It must be applied before anything imports eventlet or the
libraries that patching affects, so it is done here, first, the way
``nova.tests.functional`` does it. Run the suite once per value.
"""

# autopep8: off
from nova import monkey_patch; monkey_patch.patch()  # noqa: E702
# autopep8: on

import logging  # noqa: E402

# Nova's thread pools log their shutdown at INFO when a test's services
# stop, after the test's log capture has ended: lines on the console for
# every test, with nothing to act on.
logging.getLogger('nova.thread_pool_factory').setLevel(logging.WARNING)
