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

"""The harness of these tests: :mod:`mlaccel_lab.testing.cinderharness`."""

from cinder.tests.unit import fake_constants as fake  # noqa: F401

from mlaccel_lab.testing.cinderharness import BACKEND  # noqa: F401
from mlaccel_lab.testing.cinderharness import image_bytes  # noqa: F401
from mlaccel_lab.testing.cinderharness import INTERNAL_PROJECT  # noqa: F401
from mlaccel_lab.testing.cinderharness import INTERNAL_USER  # noqa: F401
from mlaccel_lab.testing.cinderharness import MIB  # noqa: F401
from mlaccel_lab.testing.cinderharness import MirrorTestBase  # noqa: F401
