"""``python -m mlaccel.taskd``: the same as the ``mlaccel-taskd`` script."""

import sys

from mlaccel.taskd import daemon

sys.exit(daemon.main())
