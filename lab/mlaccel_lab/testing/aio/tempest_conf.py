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

"""A tempest workspace for an all-in-one cloud.

``.stestr.conf`` and ``etc/tempest.conf`` are written directly
(``tempest init`` would write into the home directory).
"""

import importlib.util
import os

from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import pools


def workspace(lay):
    return lay.path('tempest')


def write(lay):
    """Write the workspace for the running cloud; return its path."""
    cloud = lay.load_cloud()
    # Found, not imported: the CI job's module loads without tempest.
    top = os.path.dirname(os.path.dirname(
        importlib.util.find_spec('tempest').origin))
    ws = workspace(lay)
    for sub in ('etc', 'logs', 'lock'):
        os.makedirs(os.path.join(ws, sub), exist_ok=True)
    with open(os.path.join(ws, '.stestr.conf'), 'w') as f:
        f.write('[DEFAULT]\ntest_path=%s\ntop_dir=%s\n'
                'group_regex=([^\\.]*\\.)*\n'
                % (os.path.join(top, 'tempest', 'test_discover'), top))
    filters = configs.scheduler_filters()
    if lay.settings.mlaccel:
        filters.append('BuildSlotFilter')
    settings = lay.settings
    configs.write(os.path.join(ws, 'etc', 'tempest.conf'), {
        'DEFAULT': {'log_dir': os.path.join(ws, 'logs'),
                    'log_file': 'tempest.log'},
        'oslo_concurrency': {'lock_path': os.path.join(ws, 'lock')},
        'auth': {'admin_username': 'admin',
                 'admin_password': aio_layout.ADMIN_PASSWORD,
                 'admin_project_name': 'admin',
                 'admin_domain_name': 'Default',
                 'use_dynamic_credentials': True},
        'identity': {'uri_v3': lay.auth_url, 'auth_version': 'v3',
                     'region': aio_layout.REGION},
        'identity-feature-enabled': {'api_v2': False},
        'compute': {'image_ref': cloud['image_id'],
                    'image_ref_alt': cloud['image_id'],
                    'flavor_ref': cloud['flavor_id'],
                    'flavor_ref_alt': cloud['flavor_alt_id'],
                    'build_timeout': 120,
                    'min_compute_nodes': settings.computes,
                    'min_microversion': '2.1',
                    'max_microversion': 'latest'},
        'compute-feature-enabled': {
            'scheduler_enabled_filters': ','.join(filters),
            'vnc_console': False,
            # The test driver's console output is the guest's real output,
            # but upstream tests expect a booted OS's.
            'console_output': False,
            'snapshot': False,
            'live_migration': False,
            'resize': True,
            'cold_migration': False,
            'personality': False,
            'config_drive': False,
            'metadata_service': False},
        'image-feature-enabled': {'api_v1': False},
        'service_available': {'nova': True, 'glance': True,
                              'cinder': settings.cinder, 'neutron': False,
                              'swift': False, 'mlaccel': settings.mlaccel},
        'validation': {'run_validation': False},
        'mlaccel': {'statebus_url': lay.statebus_url,
                    'same_host_as_computes': True,
                    'cinder_notification_url': (lay.transport_url
                                                if settings.cinder else ''),
                    'pool_config_file': (pools.config_file(lay)
                                         if settings.mlaccel else '')},
    })
    return ws
