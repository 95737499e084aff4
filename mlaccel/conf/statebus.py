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

"""Options of the state bus that carries host reports."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_statebus',
    title='mlaccel state bus',
    help='Where compute-node agents publish host reports and where the '
         'scheduler plugins read them from. The bus is a tooz coordination '
         'backend shared by every node that runs an mlaccel part.')

OPTS = [
    cfg.StrOpt(
        'backend_url',
        default='file:///var/lib/mlaccel/statebus',
        secret=True,
        help='tooz backend URL of the state bus. The file backend '
             '(file:///path) suits a single node or a shared file system; '
             'its directory is created mode 0700. Across nodes use '
             'redis://, etcd3+http:// or zookeeper://. A Redis password or '
             'ACL user goes in the URL, "redis://USER:PASSWORD@host:6379"; '
             'TLS is "rediss://host:6380?ssl_ca_certs=/path/ca.pem" (or '
             'redis://...?ssl=true). The URL is treated as a secret: '
             'mlaccel masks its password in logs, errors and command '
             'output. Liveness timeouts are set the tooz way in the URL, '
             'e.g. "redis://127.0.0.1:6379?timeout=5".'),
    cfg.StrOpt(
        'group',
        default='mlaccel.hosts',
        help='tooz group that every agent joins with its host report as '
             'the member capabilities.'),
    cfg.StrOpt(
        'deployment_key_file',
        help='File holding the deployment secret of the state bus (made by '
             '"mlaccel-statebus keygen"), for readers only: nova-scheduler, '
             'cinder-scheduler, "mlaccel-statebus show". With it, a reader '
             'accepts only reports signed with the key of the host they '
             'name, HMAC-SHA256(secret, "mlaccel-host:" + host), and drops '
             'unsigned or badly signed ones (logged). Without it, reports '
             'are accepted unsigned and the reader logs once that they are '
             'not authenticated. Never give this file to compute nodes. '
             'The file must not be accessible to other users (mode 0600 '
             'or 0640).'),
    cfg.StrOpt(
        'host_key_file',
        help='File holding this host\'s own report key (made by '
             '"mlaccel-statebus derive --host HOST"), for publishers: the '
             'compute node\'s agent. Reports are signed with it; a key '
             'signs for its own host only. Without it, reports are '
             'published unsigned, which readers holding a deployment key '
             'reject. The file must not be accessible to other users.'),
    cfg.FloatOpt(
        'max_clock_skew',
        default=10.0,
        min=0.0,
        help='A report dated more than this many seconds in the future, by '
             'the reader\'s clock, is rejected: it would otherwise stay '
             'fresh for as long as its date is ahead.'),
    cfg.FloatOpt(
        'refresh_interval',
        default=2.0,
        min=0.1,
        help='Seconds between two reads of all host reports by the '
             'scheduler-side cache. Each refresh is one call to the bus, '
             'made by a background thread; scheduling never waits for it. '
             'Signatures are checked during the refresh, only for reports '
             'that changed.'),
    cfg.FloatOpt(
        'report_max_age',
        default=30.0,
        min=1.0,
        help='A host report older than this many seconds, judged by the '
             'timestamp the agent wrote into it, counts as missing. tooz '
             'keeps returning a dead member\'s last capabilities, so this '
             'is what makes a stopped agent\'s data expire.'),
    cfg.IntOpt(
        'max_report_bytes',
        default=65536,
        min=1024,
        help='Largest encoded host report accepted, in bytes. Larger '
             'reports are rejected and logged, never parsed.'),
    cfg.IntOpt(
        'max_cached_images',
        default=4096,
        min=1,
        help='Largest number of image ids one host report may list.'),
]
