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

"""Options of the task launcher (``mlaccel launch``)."""

from oslo_config import cfg


GROUP = cfg.OptGroup(
    'mlaccel_launcher',
    title='mlaccel task launcher',
    help='How "mlaccel launch" creates a task\'s VMs, learns that their task '
         'daemons are ready and cleans up. Command-line flags override these '
         'defaults.')

OPTS = [
    cfg.HostAddressOpt(
        'listen_host',
        default='0.0.0.0',
        help='Address the readiness listener binds. The task daemon in each '
             'VM pushes its readiness to it over HTTPS (pinning the '
             'listener\'s certificate, signed with the VM\'s own token), so '
             'it must be reachable from the VMs\' network.'),
    cfg.PortOpt(
        'listen_port',
        default=0,
        help='Port of the readiness listener; 0 picks a free port for each '
             'launch.'),
    cfg.HostAddressOpt(
        'callback_host',
        help='Host name or address the VMs use to reach the readiness '
             'listener, written into each VM\'s readiness URL. Required when '
             'listen_host is a wildcard address.'),
    cfg.PortOpt(
        'taskd_port',
        default=7070,
        help='TCP port the task daemon in each VM listens on for the '
             'launcher (on every interface of the guest). The launcher '
             'reaches it over TLS with a certificate made for that VM alone '
             'and pinned, and authenticates with a token of that VM alone; '
             'both reach the VM only through its user-data. It connects only '
             'to an address Nova lists for the VM\'s server (fixed or '
             'floating), whatever host the daemon\'s readiness push '
             'names, at the port the push reports.'),
    cfg.ListOpt(
        'preload',
        default=[],
        help='Modules the task daemon imports before it reports ready, so '
             'that forked tasks start warm ("module" or "module:warm-up '
             'function"). Empty (the default): nothing is preloaded. For '
             'the example task: torch,torch._dynamo,'
             'mlaccel.tasks.clip:warm (mlaccel.tasks.clip.PRELOAD).'),
    cfg.StrOpt(
        'tls_cert_file',
        help='Certificate (PEM) of the readiness listener, first in the '
             'file, optionally followed by the chain that issued it. The VMs '
             'get the file in their user-data and pin its first certificate '
             'alone: no other certificate passes as the listener, not even '
             'one issued by the same CA, and host names are not checked. '
             'Unset (the default): each launch makes a fresh self-signed '
             'certificate and key, kept in memory, and gives the '
             'certificate to its VMs in their user-data. The listener '
             'always serves HTTPS.'),
    cfg.StrOpt(
        'tls_key_file',
        help='Private key of tls_cert_file; required with it.'),
    cfg.FloatOpt(
        'poll_interval',
        default=1.0,
        min=0.2,
        help='Seconds between two status reads of all the launch\'s servers '
             '(one list call). Polling is only the fallback that notices '
             'ACTIVE and ERROR; readiness itself is pushed.'),
    cfg.IntOpt(
        'initial_parallelism',
        default=4,
        min=1,
        help='Server creations in flight at first. Each creation holds a '
             'slot of the adaptive limiter from its API call until the '
             'server is ACTIVE or failed; the limit then follows the '
             'measured latency.'),
    cfg.IntOpt(
        'max_parallelism',
        default=32,
        min=1,
        help='Most server creations ever in flight at once.'),
    cfg.FloatOpt(
        'delete_timeout',
        default=300.0,
        min=1.0,
        help='Seconds to wait for all the launch\'s servers to disappear '
             'after deleting them; the ones left are reported as leaked.'),
    cfg.StrOpt(
        'notification_url',
        secret=True,
        help='oslo.messaging transport URL on which Nova publishes its '
             'versioned notifications (e.g. rabbit://user:password@host:5672/'
             '). When set, the launcher listens to them, on a queue of its '
             'own removed at the end of the launch, and takes the end of '
             'scheduling and the moment each VM turned ACTIVE from them, to '
             'the microsecond. Nova must have [notifications] '
             'notification_format = versioned (or both) and '
             '[oslo_messaging_notifications] driver = messagingv2. Unset, '
             'the record falls back to Nova\'s instance actions (whole '
             'seconds on MySQL and MariaDB, the build start standing in for '
             'the end of scheduling). Needs oslo.messaging.'),
    cfg.StrOpt(
        'notification_topic',
        default='versioned_notifications',
        help='Topic of Nova\'s versioned notifications, as in Nova\'s '
             '[notifications] versioned_notifications_topics.'),
    cfg.StrOpt(
        'name_prefix',
        default='mlaccel',
        regex=r'^[A-Za-z0-9][A-Za-z0-9_.]*$',
        help='First part of every server name, <prefix>-<launch id>-<index>.'
             ' Cleanup finds servers whose create response was lost by that '
             'name and their mlaccel_launch metadata.'),
]
