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

"""Write the services' configuration files of an all-in-one cloud.

mlaccel itself is enabled afterwards by ``mlaccel-config``, the command the
devstack plugin runs too (see :mod:`mlaccel_lab.testing.aio.cloud`).
"""

import os
import shutil

from oslo_log import log as oslo_log

from mlaccel.statebus import keys as statebus_keys
from mlaccel_lab.testing.aio import layout as aio_layout

#: The compute driver name the computes load (see mlaccel_lab.testing.compute).
TEST_DRIVER = 'mlaccel_testing.GuestProcessDriver'


def render(sections):
    """INI text of ``{section: {key: value or [values]}}``."""
    out = []
    for section, options in sections.items():
        out.append('[%s]' % section)
        for key, value in options.items():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, bool):
                    item = str(item).lower()
                out.append('%s = %s' % (key, item))
        out.append('')
    return '\n'.join(out)


def write(path, sections):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(render(sections))


def _authtoken(lay, user):
    return {
        'www_authenticate_uri': lay.url('keystone'),
        'auth_url': lay.url('keystone'),
        'auth_type': 'password',
        'project_domain_name': 'Default',
        'user_domain_name': 'Default',
        'project_name': 'service',
        'username': user,
        'password': aio_layout.SERVICE_PASSWORD,
        'service_token_roles_required': True,
    }


def _client(lay, user):
    """A keystoneauth section a service uses to call another one."""
    return {
        'auth_type': 'password',
        'auth_url': lay.url('keystone'),
        'project_domain_name': 'Default',
        'user_domain_name': 'Default',
        'project_name': 'service',
        'username': user,
        'password': aio_layout.SERVICE_PASSWORD,
        'region_name': aio_layout.REGION,
    }


def keystone(lay):
    keys = lay.path('etc', 'keystone')
    write(lay.path('etc', 'keystone', 'keystone.conf'), {
        'database': {'connection': lay.db_url('keystone')},
        'token': {'provider': 'fernet'},
        'fernet_tokens': {'key_repository': os.path.join(keys, 'fernet')},
        'fernet_receipts': {'key_repository': os.path.join(keys, 'fernet')},
        'credential': {'key_repository': os.path.join(keys, 'credential')},
    })


def glance(lay):
    data = lay.path('data', 'glance')
    for sub in ('images', 'staging', 'tasks'):
        os.makedirs(os.path.join(data, sub), exist_ok=True)
    write(lay.path('etc', 'glance', 'glance-api.conf'), {
        'DEFAULT': {'enabled_backends': 'fs:file'},
        'glance_store': {'default_backend': 'fs'},
        'fs': {'filesystem_store_datadir': os.path.join(data, 'images')},
        'os_glance_staging_store': {
            'filesystem_store_datadir': os.path.join(data, 'staging')},
        'os_glance_tasks_store': {
            'filesystem_store_datadir': os.path.join(data, 'tasks')},
        'database': {'connection': lay.db_url('glance')},
        'paste_deploy': {
            'flavor': 'keystone',
            'config_file': os.path.join(lay.venv, 'etc', 'glance',
                                        'glance-api-paste.ini')},
        'oslo_concurrency': {'lock_path': data},
        'keystone_authtoken': _authtoken(lay, 'glance'),
    })


def placement(lay):
    write(lay.path('etc', 'placement', 'placement.conf'), {
        'placement_database': {'connection': lay.db_url('placement')},
        'api': {'auth_strategy': 'keystone'},
        'keystone_authtoken': _authtoken(lay, 'placement'),
    })


def nova(lay):
    """nova.conf shared by every nova service, plus one file per compute."""
    etc = lay.path('etc', 'nova')
    data = lay.path('data', 'nova')
    os.makedirs(os.path.join(data, 'lock'), exist_ok=True)
    sections = {
        'DEFAULT': {
            'host': 'aio',
            'my_ip': '127.0.0.1',
            'transport_url': lay.transport_url,
            'state_path': data,
        },
        'api': {'auth_strategy': 'keystone'},
        'wsgi': {'api_paste_config': os.path.join(etc, 'api-paste.ini')},
        'api_database': {'connection': lay.db_url('nova_api')},
        'database': {'connection': lay.db_url('nova')},
        'oslo_concurrency': {'lock_path': os.path.join(data, 'lock')},
        'scheduler': {'workers': 1, 'discover_hosts_in_cells_interval': 10},
        'filter_scheduler': {
            'available_filters': ['nova.scheduler.filters.all_filters'],
            'enabled_filters': ','.join(scheduler_filters()),
            # Nova 34 weighs concurrent requests in parallel, each on host
            # states made from the compute records: a burst sees every
            # host alike until the computes claim its builds. Ties then go
            # to a random best host instead of all to the first one.
            'shuffle_best_same_weighed_hosts': True,
        },
        'conductor': {'workers': 1},
        'vnc': {'enabled': False},
        # Versioned notifications give the launcher's life-cycle records
        # their precise boundaries (mlaccel.nova.notifications).
        'notifications': {'notification_format': 'versioned'},
        'oslo_messaging_notifications': {'driver': 'messagingv2'},
        'keystone_authtoken': _authtoken(lay, 'nova'),
        'placement': _client(lay, 'nova'),
        'neutron': _client(lay, 'nova'),
        'glance': {'region_name': aio_layout.REGION},
        'service_user': dict(_client(lay, 'nova'),
                             send_service_user_token=True),
    }
    if lay.settings.cinder:
        sections['cinder'] = _client(lay, 'nova')
    if lay.etcd:
        # A call to a scheduler that was killed holding it fails after
        # this many seconds without a heartbeat (60 by default): the
        # failure tests of several controllers wait for it.
        sections['DEFAULT']['rpc_response_timeout'] = 20
    # Signed host reports: the scheduler holds the deployment key, each
    # compute only its own derived key.
    host_keys = {host: host_key_file(lay, host)
                 for host in lay.compute_hosts()}
    deployment_key = provision_keys(
        lay, {path: [host] for host, path in host_keys.items()})
    sections['mlaccel_statebus'] = {'deployment_key_file': deployment_key}
    write(os.path.join(etc, 'nova.conf'), sections)
    # nova-api's WSGI app finds api-paste.ini and nova.conf in one folder.
    shutil.copy(os.path.join(lay.venv, 'etc', 'nova', 'api-paste.ini'), etc)
    for host in lay.compute_hosts():
        state = lay.path('data', 'nova-' + host)
        os.makedirs(state, exist_ok=True)
        write(os.path.join(etc, 'compute-%s.conf' % host), {
            'DEFAULT': {'host': host, 'state_path': state,
                        'compute_driver': TEST_DRIVER},
            'mlaccel_statebus': {'deployment_key_file': '',
                                 'host_key_file': host_keys[host]},
        })


def host_key_file(lay, host):
    """The key compute ``host`` signs its host reports with."""
    return lay.path('etc', 'mlaccel', 'statebus-%s.key' % host)


def provision_keys(lay, host_key_files):
    """Make the deployment key once and ``{path: [host]}``'s host keys.

    Returns the deployment key file.
    """
    keys_dir = lay.path('etc', 'mlaccel')
    os.makedirs(keys_dir, mode=0o700, exist_ok=True)
    deployment_key = os.path.join(keys_dir, 'statebus-deployment.key')
    statebus_keys.provision(deployment_key, host_key_files)
    return deployment_key


def publisher_state_dir(lay, service):
    """Where ``service`` keeps the sequence numbers of its reports."""
    return lay.path('data', 'mlaccel-publisher', service)


def compute_config_files(lay, host):
    """nova-compute's configuration files on ``host``, in order."""
    etc = lay.path('etc', 'nova')
    return [os.path.join(etc, 'nova.conf'),
            os.path.join(etc, 'compute-%s.conf' % host)]


def scheduler_filters():
    """The stock filters the cloud enables (mlaccel's are added to them)."""
    return ['ComputeFilter', 'ComputeCapabilitiesFilter',
            'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
            'ServerGroupAffinityFilter', 'SameHostFilter',
            'DifferentHostFilter']


CINDER_INTERNAL_PROJECT = 'f0f0f0f0-0000-4000-8000-00000000c1de'
CINDER_INTERNAL_USER = 'f0f0f0f0-0000-4000-8000-00000000a5e7'
#: Seconds between two passes of the mirror-volume cache's pre-warm task.
CINDER_PREWARM_INTERVAL = 3
#: cinder-volume's host name and its one backend (section) name.
CINDER_HOST = 'aio'
CINDER_BACKEND = 'file'


def volume_dir(lay):
    """Where Cinder's file volumes live (``mlaccel_file_volume_dir``)."""
    return lay.path('data', 'cinder', 'volumes')


def cinder(lay):
    data = lay.path('data', 'cinder')
    os.makedirs(os.path.join(data, 'lock'), exist_ok=True)
    # cinder-volume signs its backend's report with that backend's key
    # (host@backend) and, like cinder-scheduler, reads reports with the
    # deployment key.
    host_key = lay.path('etc', 'mlaccel', 'statebus-cinder.key')
    deployment_key = provision_keys(
        lay, {host_key: ['%s@%s' % (CINDER_HOST, CINDER_BACKEND)]})
    write(lay.path('etc', 'cinder', 'cinder.conf'), {
        'DEFAULT': {
            'host': CINDER_HOST,
            'my_ip': '127.0.0.1',
            'transport_url': lay.transport_url,
            'auth_strategy': 'keystone',
            'state_path': data,
            'api_paste_config': os.path.join(lay.venv, 'etc', 'cinder',
                                             'api-paste.ini'),
            'enabled_backends': CINDER_BACKEND,
            # The mirror-volume cache's golden volumes belong to this
            # project (Cinder does not ask Keystone about it).
            'cinder_internal_tenant_project_id': CINDER_INTERNAL_PROJECT,
            'cinder_internal_tenant_user_id': CINDER_INTERNAL_USER,
            # Cinder's own image-volume cache logs each hit and miss at
            # debug only: the experiment counts its copies from them.
            'default_log_levels': ','.join(
                oslo_log.get_default_log_levels()
                + ['cinder.image.cache=DEBUG']),
        },
        # Volumes that hold real bytes; mlaccel-config wraps this backend
        # in the mirror-volume driver (cloud.enable_mlaccel).
        CINDER_BACKEND: {
            'volume_driver': 'mlaccel_lab.testing.filevolume.FileVolumeDriver',
            'volume_backend_name': 'file',
            'mlaccel_file_volume_dir': volume_dir(lay),
        },
        # Glance access of the mirror-volume cache's pre-warm task.
        'glance': _client(lay, 'cinder'),
        'database': {'connection': lay.db_url('cinder')},
        'oslo_concurrency': {'lock_path': os.path.join(data, 'lock')},
        # Stock Cinder's image path (the mirror switched off) runs
        # privileged steps; the cloud runs as root, without sudo.
        'cinder_sys_admin': {'helper_command': ' '.join([
            lay.bin('privsep-helper'), '--config-file',
            lay.path('etc', 'cinder', 'cinder.conf')])},
        # The mirror-volume cache tells what it did (hit, fill, ...) by
        # notifications, which the cloud's tests listen to.
        'oslo_messaging_notifications': {'driver': 'messagingv2'},
        # Images marked hot in Glance get golden within seconds.
        'mlaccel_cinder': {'prewarm_interval': CINDER_PREWARM_INTERVAL},
        'mlaccel_statebus': {
            'deployment_key_file': deployment_key,
            'host_key_file': host_key,
            'publisher_state_dir': publisher_state_dir(lay, 'cinder-volume'),
        },
        'keystone_authtoken': _authtoken(lay, 'cinder'),
        'nova': _client(lay, 'cinder'),
        'service_user': dict(_client(lay, 'cinder'),
                             send_service_user_token=True),
    })


def controller_file(lay, service, controller):
    """The file controller 2, 3, ... reads after ``service``'s shared one.

    ``service`` is ``nova``, ``cinder`` or ``mlaccel`` (its pool
    manager); the file names its host and its local etcd member.
    """
    return lay.path('etc', service, 'controller%d.conf' % controller)


def controllers(lay):
    """The files of the controllers after the first, if any."""
    for controller in lay.extra_controllers():
        bus = {'mlaccel_statebus': {
            'backend_url': lay.controller_bus_url(controller)}}
        host = {'DEFAULT': {'host': 'aio-controller%d' % controller}}
        for service in ('nova', 'cinder', 'mlaccel'):
            write(controller_file(lay, service, controller),
                  dict(bus, **host) if service != 'mlaccel' else bus)


def clouds_yaml(lay):
    auth = lay.admin_auth()
    keys = ('auth_url', 'username', 'password', 'project_name',
            'user_domain_id', 'project_domain_id')
    text = ('clouds:\n  aio-admin:\n    auth:\n'
            + ''.join('      %s: %s\n' % (key, auth[key]) for key in keys)
            + '    region_name: %s\n    identity_api_version: 3\n'
            % aio_layout.REGION)
    with open(lay.clouds_yaml, 'w') as f:
        f.write(text)


def write_all(lay):
    for name in ('etc', 'data', 'log', 'run', 'pids'):
        os.makedirs(getattr(lay, name), exist_ok=True)
    keystone(lay)
    glance(lay)
    placement(lay)
    nova(lay)
    if lay.settings.cinder:
        cinder(lay)
    controllers(lay)
    clouds_yaml(lay)
