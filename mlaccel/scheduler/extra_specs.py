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

"""``mlaccel:`` flavor extra specs, validated by Nova's API.

Registered in Nova's ``nova.api.extra_spec_validators`` namespace: once
mlaccel is installed beside nova-api, an unknown ``mlaccel:`` key or a bad
value is refused when the flavor is updated.
"""

import dataclasses

from nova.api.validation.extra_specs import base
from oslo_utils import strutils

PREFIX = 'mlaccel:'

IMAGE_LOCALITY = PREFIX + 'image_locality'
BUILD_SLOTS = PREFIX + 'build_slots'
WARM_START = PREFIX + 'warm_start'

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
        name=IMAGE_LOCALITY,
        description=(
            'Whether the mlaccel weighers prefer hosts that hold the '
            'image in their cache. Defaults to true.'),
        value={'type': bool},
    ),
    base.ExtraSpecValidator(
        name=BUILD_SLOTS,
        description=(
            'Whether the BuildSlotFilter keeps this flavor off hosts whose '
            'builds in flight reached their adaptive limit ("enforce", the '
            'default) or lets it queue there ("ignore").'),
        value={'type': str, 'enum': ['enforce', 'ignore']},
    ),
    base.ExtraSpecValidator(
        name=WARM_START,
        description=(
            'Deprecated and ignored: host reports do not say where a warm '
            'task daemon waits (warm pools hand theirs out without the '
            'scheduler). Still accepted, so that existing flavors stay '
            'valid.'),
        deprecated=True,
        value={'type': bool},
    ),
]


@dataclasses.dataclass(frozen=True)
class Policy:
    """What a request's flavor asks of the mlaccel plugins."""

    image_locality: bool = True
    build_slots: bool = True


DEFAULT_POLICY = Policy()


def register():
    return EXTRA_SPEC_VALIDATORS


def policy(spec_obj):
    """Read the :class:`Policy` of a RequestSpec's flavor (cheap, no I/O).

    Values were validated by the API; anything unreadable here takes the
    default rather than failing a boot.
    """
    flavor = getattr(spec_obj, 'flavor', None)
    specs = getattr(flavor, 'extra_specs', None) if flavor else None
    if not specs or not any(k.startswith(PREFIX) for k in specs):
        return DEFAULT_POLICY
    return Policy(
        image_locality=_bool(specs.get(IMAGE_LOCALITY), True),
        build_slots=specs.get(BUILD_SLOTS, 'enforce') != 'ignore',
    )


def _bool(value, default):
    if value is None:
        return default
    return strutils.bool_from_string(value, default=default)
