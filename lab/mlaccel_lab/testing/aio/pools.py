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

"""The all-in-one cloud's warm-pool manager and its shared configuration.

The configuration is shared with the launchers on this host.

``etc/mlaccel/pool.conf`` names the pool store (``data/pools``, private to
the user running the cloud), the cloud's state bus for the pools' locks and
the leader lock, and the launcher options a member's task daemon needs to
reach this host (loopback, the example task's preload). ``mlaccel launch``
and ``mlaccel pool`` given ``--config-file`` with it see the pools the
manager keeps.
"""

from mlaccel.tasks import clip
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import procs

SERVICE = 'mlaccel-pool-manager'
CLOUD = 'aio-admin'


def config_file(lay):
    return lay.path('etc', 'mlaccel', 'pool.conf')


def write_config(lay, interval=1.0):
    """Write ``pool.conf``; ``interval`` is the manager's round period."""
    path = config_file(lay)
    configs.write(path, {
        'mlaccel_pool': {'state_dir': lay.path('data', 'pools'),
                         'interval': interval},
        'mlaccel_statebus': {'backend_url': lay.statebus_url},
        'mlaccel_launcher': {'listen_host': '127.0.0.1',
                             'callback_host': '127.0.0.1',
                             'taskd_port': 0,
                             'notification_url': lay.transport_url,
                             'preload': ','.join(clip.PRELOAD)},
    })
    return path


def controller_service(controller):
    """The pool manager service of controller 2, 3, ..."""
    return '%s-controller%d' % (SERVICE, controller)


def start_managers(lay):
    """Start the pool manager of every controller."""
    for name in managers(lay):
        start_controller_manager(lay, name)


def managers(lay):
    """The pool manager services of the cloud's controllers."""
    return [SERVICE] + [controller_service(controller)
                        for controller in lay.extra_controllers()]


def start_controller_manager(lay, name):
    """Start the manager ``name`` of :func:`managers` with its files."""
    controller = managers(lay).index(name) + 1
    return start_manager(lay, name, [
        configs.controller_file(lay, 'mlaccel', controller)]
        if controller > 1 else [])


def start_manager(lay, name=SERVICE, more_config_files=()):
    """Start ``mlaccel-pool-manager`` as service ``name`` of the cloud.

    Managers started under other names compete for the leader lock.
    ``more_config_files`` are read after ``pool.conf``.
    """
    argv = [lay.bin(SERVICE), '--config-file', config_file(lay)]
    for path in more_config_files:
        argv += ['--config-file', path]
    return procs.start(lay, name, argv + ['--cloud', CLOUD],
                       env={'OS_CLIENT_CONFIG_FILE': lay.clouds_yaml})
