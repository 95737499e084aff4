"""nova-compute with :mod:`mlaccel.testing.virt` loadable as its driver.

Nova imports ``compute_driver`` only from inside the ``nova.virt`` package,
so this entry point registers the test driver module there as
``nova.virt.mlaccel_testing`` and then runs Nova's own nova-compute.
Configure ``compute_driver = mlaccel_testing.GuestProcessDriver``.
"""

import sys

# Nova's entry point patches the concurrency backend at import: import it
# before anything else touches threading.
from nova.cmd import compute  # noqa: I100 (must come first)

from mlaccel.testing import virt

ALIAS = 'nova.virt.mlaccel_testing'


def main():
    sys.modules.setdefault(ALIAS, virt)
    return compute.main()


if __name__ == '__main__':
    sys.exit(main())
