"""The harness of these tests: :mod:`mlaccel.testing.cinderharness`."""

from cinder.tests.unit import fake_constants as fake  # noqa: F401

from mlaccel.testing.cinderharness import BACKEND  # noqa: F401
from mlaccel.testing.cinderharness import image_bytes  # noqa: F401
from mlaccel.testing.cinderharness import INTERNAL_PROJECT  # noqa: F401
from mlaccel.testing.cinderharness import INTERNAL_USER  # noqa: F401
from mlaccel.testing.cinderharness import MIB  # noqa: F401
from mlaccel.testing.cinderharness import MirrorTestBase  # noqa: F401
