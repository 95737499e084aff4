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

"""What the agent reads of nova-compute's configuration.

The files are read with oslo.config, exactly as nova-compute reads them
(``$state_path`` interpolation, later files overriding earlier ones), on a
``ConfigOpts`` of their own with only the options the agent needs
registered, with Nova's defaults. The same object configures the
notification transport, so its ``[oslo_messaging_*]`` settings apply too.
"""

import dataclasses
import os
import socket

from oslo_config import cfg


class NovaConfError(Exception):
    """nova.conf is missing or unreadable, or a value is unusable."""


@dataclasses.dataclass(frozen=True)
class NovaSettings:
    """nova-compute's settings the agent shares.

    :ivar host: ``[DEFAULT] host``, the name the scheduler knows.
    :ivar cache_dir: ``$instances_path/<[image_cache] subdirectory_name>``.
    :ivar lock_dir: where nova-compute keeps the external locks it takes
        while it fills the cache (``$instances_path/locks``).
    :ivar force_raw: ``[DEFAULT] force_raw_images``.
    :ivar max_builds: ``[DEFAULT] max_concurrent_builds``, the builds
        nova-compute runs at once (0: unlimited).
    :ivar transport_url: the notification transport (``None``: none set).
    :ivar topics: ``[notifications] versioned_notifications_topics``.
    :ivar conf: the ``ConfigOpts`` holding nova.conf.
    """

    host: str
    cache_dir: str
    lock_dir: str
    force_raw: bool
    transport_url: str
    topics: tuple
    conf: object = dataclasses.field(repr=False, compare=False)
    max_builds: int = 10


_DEFAULT_OPTS = [
    cfg.StrOpt('host', default=socket.gethostname(), sample_default='<host>'),
    cfg.StrOpt('state_path', default='/var/lib/nova'),
    cfg.StrOpt('instances_path', default='$state_path/instances'),
    cfg.BoolOpt('force_raw_images', default=True),
    cfg.IntOpt('max_concurrent_builds', default=10, min=0),
]
_GROUP_OPTS = {
    'image_cache': [cfg.StrOpt('subdirectory_name', default='_base')],
    'notifications': [cfg.ListOpt('versioned_notifications_topics',
                                  default=['versioned_notifications'])],
}


def _register_messaging(conf):
    """oslo.messaging's own options (transport, RabbitMQ TLS...).

    Without oslo.messaging installed, only the transport URLs are read, to
    say that notifications would be available.
    """
    try:
        from oslo_messaging import opts
    except ImportError:
        conf.register_opts([cfg.StrOpt('transport_url', secret=True)])
        conf.register_opts([cfg.StrOpt('transport_url', secret=True)],
                           group='oslo_messaging_notifications')
        return
    for group, group_opts in opts.list_opts():
        conf.register_opts(group_opts, group=group)


def load(files):
    """Read ``files`` (nova.conf first) into :class:`NovaSettings`.

    :raises NovaConfError: if the first file is missing or a file cannot
        be parsed.
    """
    files = [path for path in files if path]
    if not files:
        raise NovaConfError('[mlaccel_agent] nova_config_files is empty')
    for path in files:
        if not os.path.isfile(path):
            raise NovaConfError('nova configuration file %s does not exist'
                                % path)
        if not os.access(path, os.R_OK):
            raise NovaConfError('nova configuration file %s is not readable'
                                % path)
    conf = cfg.ConfigOpts()
    conf.register_opts(_DEFAULT_OPTS)
    for group, opts in _GROUP_OPTS.items():
        conf.register_opts(opts, group=group)
    _register_messaging(conf)
    try:
        conf([], project='nova', default_config_files=files,
             default_config_dirs=[], use_env=False)
        host = conf.host
        instances = conf.instances_path
        subdir = conf.image_cache.subdirectory_name
        url = (conf.oslo_messaging_notifications.transport_url
               or conf.transport_url)
    except (cfg.Error, ValueError) as exc:
        raise NovaConfError('cannot read %s: %s' % (', '.join(files), exc))
    if not host:
        raise NovaConfError('[DEFAULT] host is empty in %s' % files[0])
    if not instances or not os.path.isabs(instances):
        raise NovaConfError('[DEFAULT] instances_path %r is not an absolute '
                            'path' % instances)
    if not subdir or os.sep in subdir or subdir in ('.', '..'):
        raise NovaConfError('[image_cache] subdirectory_name %r is not a '
                            'directory name' % subdir)
    return NovaSettings(
        host=host, cache_dir=os.path.join(instances, subdir),
        lock_dir=os.path.join(instances, 'locks'),
        force_raw=conf.force_raw_images, transport_url=url,
        topics=tuple(conf.notifications.versioned_notifications_topics),
        conf=conf, max_builds=conf.max_concurrent_builds)
