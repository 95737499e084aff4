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
             'redis:// or etcd3+http://...?api_version=v3 (each controller '
             'its own local etcd member). A Redis password or '
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
        help='File holding the deployment keys of the state bus (made by '
             '"mlaccel-statebus keygen"), for readers only: nova-scheduler, '
             'cinder-scheduler, "mlaccel-statebus show". One key a line, '
             '"KEY-ID SECRET", the current key first; a reader accepts '
             'reports signed with any key of the file, so a second line '
             'keeps the previous key valid while keys are rotated '
             '("mlaccel-statebus rotate"). The file is read again when it '
             'changes. A reader accepts only reports signed with the key '
             'of the host they name, HMAC-SHA256(secret, "mlaccel-host:" + '
             'host), each newer than the last one it accepted of that '
             'host, and drops the others (logged). Without this file a '
             'reader uses no reports at all (the scheduler then acts as '
             'stock Nova) unless allow_unsigned_reports is set. Never give '
             'this file to compute nodes. The file must not be accessible '
             'to other users (mode 0600 or 0640).'),
    cfg.StrOpt(
        'host_key_file',
        help='File holding this host\'s own report keys (made by '
             '"mlaccel-statebus derive --host HOST"), for publishers: the '
             'compute node\'s agent, cinder-volume. One key a line, '
             '"KEY-ID HOST KEY"; a publisher signs with the first line '
             'naming its host (cinder-volume: "host@backend"), and a key '
             'signs for its own host only. Without it, nothing is published '
             'unless allow_unsigned_reports is set. The file must not be '
             'accessible to other users.'),
    cfg.StrOpt(
        'publisher_state_dir',
        default='/var/lib/mlaccel/publisher',
        help='Directory where a publisher keeps the high-water mark of the '
             'sequence numbers it signs into its reports (one small file '
             'per host and group, fsynced), so that a restarted publisher '
             'goes on above every number it used. Created mode 0700 if '
             'missing; it must be writable by the service that publishes '
             '(give nova-compute\'s agent and cinder-volume directories of '
             'their own). If it is lost, the numbers start again from the '
             'clock, in milliseconds.'),
    cfg.BoolOpt(
        'allow_unsigned_reports',
        default=False,
        help='INSECURE, for test clouds only. Without a key file, a reader '
             'normally uses no reports and a publisher publishes none. With '
             'this option a reader without deployment_key_file accepts '
             'every report unverified, so that any client of the bus can '
             'speak for any host, and a publisher without host_key_file '
             'publishes unsigned reports. Logged as a warning by every '
             'service that uses it. It has no effect where a key file is '
             'set: signatures are then always required.'),
    cfg.FloatOpt(
        'max_clock_skew',
        default=10.0,
        min=0.0,
        help='A report dated more than this many seconds in the future, by '
             'the reader\'s clock, is rejected: it would otherwise stay '
             'fresh for as long as its date is ahead.'),
    cfg.FloatOpt(
        'refresh_interval',
        default=1.0,
        min=0.1,
        help='Seconds between two refreshes of the scheduler-side cache of '
             'host reports, made by a background thread; scheduling never '
             'waits for it. A refresh fetches only the reports that changed '
             'since the last one (on Redis through a change index the agents '
             'keep, on etcd by revision, on a file bus when the directory '
             'changed), and every report every 300 s or when a member left. '
             'Signatures are checked only for reports that changed. A '
             'changed report reaches the schedulers within about this long '
             'plus the refresh itself.'),
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
