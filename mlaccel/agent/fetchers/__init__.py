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

"""Pre-fetchers: plugins of the ``mlaccel.agent.fetchers`` namespace.

A fetcher is a class built as ``Fetcher(settings, opts, cloud, cache)``
(:class:`~mlaccel.agent.novaconf.NovaSettings`, the ``[mlaccel_agent]``
options, a :class:`~mlaccel.agent.cloud.Cloud` and the
:class:`~mlaccel.agent.inventory.ImageCache`) whose
``fetch(image, stopping)`` puts one
:class:`~mlaccel.agent.cachefile.ImageMeta` into the image cache and
returns a :class:`~mlaccel.agent.cachefile.Written` (``None`` if it was
there) or raises :class:`~mlaccel.agent.cachefile.FetchFailed` (nothing
left behind) or what the cloud's client raises (Glance or Nova
unreachable: the caller retries later).
"""

from stevedore import driver

NAMESPACE = 'mlaccel.agent.fetchers'
#: The configured name that disables pre-fetching.
NONE = 'none'


class UnknownFetcher(Exception):
    """No fetcher plugin of that name is installed."""


def load(name, settings, opts, cloud, cache):
    """Build the fetcher ``name``; ``None`` for :data:`NONE`.

    :raises UnknownFetcher: if no such plugin is installed.
    """
    if name == NONE:
        return None
    try:
        manager = driver.DriverManager(
            NAMESPACE, name, invoke_on_load=True,
            invoke_args=(settings, opts, cloud, cache))
    except Exception as exc:
        raise UnknownFetcher('[mlaccel_agent] fetcher %r cannot be loaded '
                             'from the %s namespace: %s'
                             % (name, NAMESPACE, exc))
    return manager.driver
