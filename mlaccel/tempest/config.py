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

"""Tempest options of the mlaccel plugin."""

from oslo_config import cfg

service_option = cfg.BoolOpt(
    'mlaccel',
    default=False,
    help='Whether mlaccel is enabled in the cloud under test (its '
         'scheduler plugins loaded by nova-scheduler, its flavor extra '
         'spec validators by nova-api).')

mlaccel_group = cfg.OptGroup(
    name='mlaccel',
    title='mlaccel options',
    help='How the mlaccel tests reach the parts of mlaccel in the cloud '
         'under test.')

MlaccelGroup = [
    cfg.StrOpt(
        'statebus_url',
        secret=True,
        help='tooz URL of the state bus the compute hosts publish their '
             'host reports on. When set, placement tests wait until a '
             'host\'s report lists an image before relying on it; when '
             'unset they rely on the scheduler\'s fallback (instances of '
             'the same image on a host).'),
    cfg.FloatOpt(
        'report_timeout',
        default=30.0,
        help='Seconds to wait for a host report to list an image.'),
    cfg.FloatOpt(
        'scheduler_refresh_interval',
        default=1.0,
        help='The scheduler\'s [mlaccel_statebus] refresh_interval: once a '
             'host report on the state bus lists an image, the tests wait '
             'this long (and half a second more) for nova-scheduler\'s '
             'report cache to have read it.'),
    cfg.BoolOpt(
        'same_host_as_computes',
        default=False,
        help='Whether tempest runs on the compute hosts and the computes '
             'run mlaccel\'s test virt driver, which starts a server\'s '
             'guest as a local process (the all-in-one test cloud). Tests '
             'that look at guest processes run only then.'),
    cfg.StrOpt(
        'pool_config_file',
        help='mlaccel configuration file ([mlaccel_pool], '
             '[mlaccel_statebus], [mlaccel_launcher]) that the launcher '
             'shares with the pool manager running in the cloud under test. '
             'When set, the warm-pool tests create a pool in its store and '
             'launch from it; when unset they are skipped.'),
    cfg.StrOpt(
        'cinder_notification_url',
        secret=True,
        help='oslo.messaging transport URL (rabbit://...) on which Cinder '
             'sends its notifications ([oslo_messaging_notifications] '
             'driver = messagingv2). When set, the mirror-volume cache tests '
             'listen there to see what the cache did (a clone of a golden '
             'volume, a download into one); when unset they are skipped.'),
    cfg.StrOpt(
        'guest_command',
        default='python -m mlaccel_lab.testing.idle_guest',
        help='Guest command the guest-process tests put in the user-data. '
             'The default is the lab\'s idle guest, which the all-in-one '
             'cloud\'s test virt driver runs.'),
]
