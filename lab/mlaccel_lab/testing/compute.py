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

"""nova-compute with :mod:`mlaccel_lab.testing.virt` loadable as its driver.

Nova imports ``compute_driver`` only from inside the ``nova.virt`` package,
so this entry point registers the test driver module there as
``nova.virt.mlaccel_testing`` and then runs Nova's own nova-compute.
Configure ``compute_driver = mlaccel_testing.GuestProcessDriver``.
"""

import sys

# Nova's entry point patches the concurrency backend at import: import it
# before anything else touches threading.
from nova.cmd import compute  # noqa: I100 (must come first)

from mlaccel_lab.testing import virt

ALIAS = 'nova.virt.mlaccel_testing'


def main():
    sys.modules.setdefault(ALIAS, virt)
    return compute.main()


if __name__ == '__main__':
    sys.exit(main())
