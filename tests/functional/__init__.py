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
