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

"""Options of mlaccel-taskd, the warm task daemon that runs in a guest."""

from oslo_config import cfg


GROUP = cfg.OptGroup(
    'mlaccel_taskd',
    title='mlaccel task daemon',
    help='mlaccel-taskd runs inside a task VM. It imports the heavy modules '
         'of a learning task once, warms them up, tells the launcher it is '
         'ready and then starts each submitted task by forking itself, so '
         'that a task reaches its first training step in milliseconds '
         'instead of seconds.')

OPTS = [
    cfg.StrOpt(
        'socket_path',
        default='/run/mlaccel/taskd.sock',
        help='Path of the Unix socket the daemon listens on. The socket is '
             'created with mode 0600 and only peers running as the '
             'daemon\'s own user or as root are served (checked with '
             'SO_PEERCRED). A stale socket file is replaced; a live one '
             'makes the daemon refuse to start.'),
    cfg.StrOpt(
        'tcp_address',
        help='Optional "HOST:PORT" to also listen on over TCP, e.g. '
             '"0.0.0.0:7707". Port 0 picks a free port, which is then '
             'reported in the readiness push. Every TCP request must carry '
             'the token from token_file; the daemon refuses to start with '
             'a TCP address but without a token, and on an address other '
             'than loopback without TLS (tls_cert_file, tls_key_file) '
             'unless insecure_tcp is set.'),
    cfg.StrOpt(
        'token_file',
        help='File holding the token that TCP clients must send in each '
             'request (surrounding white space is ignored). The daemon '
             'refuses to start when the file is readable or writable by '
             'group or others, or owned by a user other than the daemon\'s '
             'or root. The token protects the daemon from other hosts and '
             'guests, not from processes of its own host that can read the '
             'file or the daemon\'s memory (tasks included).'),
    cfg.StrOpt(
        'tls_cert_file',
        help='PEM certificate (chain) the TCP listener serves TLS with. '
             'Set together with tls_key_file; the launcher pins this '
             'certificate.'),
    cfg.StrOpt(
        'tls_key_file',
        help='PEM private key of tls_cert_file. Refused at start when '
             'group or others can read it.'),
    cfg.BoolOpt(
        'insecure_tcp',
        default=False,
        help='Allow a TCP listener on an address other than loopback '
             'without TLS. The token and every task then cross the network '
             'in clear text: for test networks only.'),
    cfg.FloatOpt(
        'auth_timeout',
        default=10.0,
        min=0.1,
        help='Seconds a TCP client has, from connecting, to finish the TLS '
             'handshake and send its first request with the right token. '
             'Until then it holds no connection slot (see max_connections) '
             'and gets no detail about the protocol; after that it is '
             'disconnected. At most max_connections peers authenticate at '
             'once; a newcomer makes the oldest of them be dropped.'),
    cfg.FloatOpt(
        'idle_timeout',
        default=300.0,
        min=0.1,
        help='Seconds a connection may stay idle (no request being read '
             'or served) before the daemon closes it and frees its slot.'),
    cfg.ListOpt(
        'preload',
        default=[],
        help='Modules to import before the daemon reports ready, as '
             '"package.module" or "package.module:function". Name lazily '
             'imported modules explicitly: for the example task, '
             '"torch,torch._dynamo,mlaccel.tasks.clip:warm" '
             '(mlaccel.tasks.clip.PRELOAD; the first optimizer step imports '
             'torch._dynamo, which costs half of a cold start). A function '
             'after the colon is a warm-up hook, called without arguments '
             'when warmup is on. The daemon refuses to start, naming the '
             'module and the error, when any preload fails.'),
    cfg.BoolOpt(
        'warmup',
        default=True,
        help='Call the warm-up hooks named in preload. They run with torch '
             'limited to one thread (restored afterwards) so that no '
             'OpenMP thread pool exists when tasks are forked; a forked '
             'child would otherwise hang in it.'),
    cfg.StrOpt(
        'ready_url',
        help='URL to POST a signed JSON readiness notice to the moment the '
             'daemon is warm, typically given in the VM\'s user-data by the '
             'launcher, e.g. "https://10.0.0.5:7800/ready/<key>". The last '
             'path segment is echoed as "key"; the notice is signed with '
             'the token of token_file. An https URL needs ready_cafile. '
             'Unset: no notice.'),
    cfg.StrOpt(
        'ready_cafile',
        help='PEM certificate of the launcher\'s readiness listener, the '
             'only one the readiness push trusts (pinned). Required for an '
             'https ready_url.'),
    cfg.IntOpt(
        'ready_attempts',
        default=8,
        min=1,
        help='How many times to try the readiness POST when the listener '
             'does not answer, with a backoff doubling from 0.1 s.'),
    cfg.FloatOpt(
        'grace_period',
        default=30.0,
        min=0.0,
        help='Seconds that running tasks get to finish after SIGTERM. '
             'During them no task is accepted and queued tasks are '
             'cancelled; tasks still running at the end are killed.'),
    cfg.FloatOpt(
        'cancel_timeout',
        default=5.0,
        min=0.0,
        help='Seconds between the SIGTERM a cancelled task gets and the '
             'SIGKILL that follows if it is still running.'),
    cfg.IntOpt(
        'max_request_bytes',
        default=65536,
        min=1024,
        help='Largest request line accepted, in bytes. A longer line is '
             'discarded unread and answered with a "too_large" error; the '
             'connection stays usable.'),
    cfg.IntOpt(
        'max_result_bytes',
        default=4 * 1024 * 1024,
        min=1024,
        help='Largest encoded result a task may return, in bytes. A larger '
             'result fails the task.'),
    cfg.IntOpt(
        'max_connections',
        default=64,
        min=1,
        help='Most authenticated client connections served at once; each '
             'has its own thread. Further connections get a "busy" error '
             'and are closed. Unauthenticated TCP connections do not hold '
             'these slots: at most as many again may be authenticating at '
             'once (the oldest is dropped for a newcomer), each for at most '
             'auth_timeout seconds.'),
    cfg.IntOpt(
        'max_tasks',
        default=16,
        min=1,
        help='Most forked tasks running at once. Further tasks wait in the '
             '"queued" state.'),
    cfg.IntOpt(
        'max_finished_tasks',
        default=1000,
        min=1,
        help='How many finished tasks are remembered for status, wait and '
             'logs requests; the oldest are forgotten first.'),
    cfg.IntOpt(
        'workers',
        default=1,
        min=0,
        help='Persistent worker processes, forked once when warm. A task '
             'submitted with mode "worker" runs inside an idle worker '
             'without a fork of its own, which saves the fork and the '
             'page faults after it; a worker runs one task at a time and '
             'is replaced when a task kills it. 0 disables worker mode.'),
    cfg.IntOpt(
        'task_threads',
        default=0,
        min=0,
        help='Default thread count of a task (torch.set_num_threads and '
             'OMP_NUM_THREADS) when the request names none. 0 means one '
             'per CPU.'),
    cfg.DictOpt(
        'task_limits',
        default={},
        help='Resource limits of tasks as name:value pairs, where name is '
             'a resource.RLIMIT_* suffix in lower case, e.g. '
             '"as:8589934592,nofile:4096,cpu:3600". They are the '
             'operator\'s ceiling, set as soft and hard limit so that a '
             'task cannot raise them: a request may only lower them (or '
             'set limits not named here, up to the daemon\'s own hard '
             'limits). A persistent worker runs under them for its whole '
             'life.'),
    cfg.ListOpt(
        'allowed_tasks',
        default=[],
        help='Besides the tasks registered in the "mlaccel.tasks" entry '
             'point namespace (submitted by name, e.g. "clip", or by their '
             '"module:function"), the "module:function" entries clients may '
             'run, as patterns where * matches anything, e.g. '
             '"mypkg.tasks:*". "*" allows any function of any importable '
             'module, such as os:system: only for a daemon whose clients '
             'may run anything as the task user anyway.'),
    cfg.StrOpt(
        'task_user',
        help='User that tasks run as. When the daemon runs as root, each '
             'task process and persistent worker drops to this user\'s uid, '
             'gid and supplementary groups before it runs a task, which '
             'clears every capability: a task can then neither signal the '
             'daemon nor read its token or change its files. The daemon '
             'refuses to start when the user does not exist, when it runs '
             'as another, unprivileged user that cannot switch, or when '
             'the user may write to a directory the daemon imports Python '
             'code from (or one above it, or the daemon\'s home while the '
             'user site directory is on). Unset, or the daemon\'s own '
             'user: tasks run as the daemon\'s user and a warning is '
             'logged, for it lets a task kill or change the daemon and so '
             'reach the tasks of a later holder of a pooled VM. The '
             'systemd unit of the guest image runs the daemon as root, '
             'started without the user site directory, with task_user '
             '"mlaccel-task" set in its environment '
             '(OS_MLACCEL_TASKD__TASK_USER).'),
    cfg.StrOpt(
        'log_dir',
        default='/var/log/mlaccel/tasks',
        help='Directory of the per-task log files (<task id>.log) that '
             'receive the task\'s stdout and stderr.'),
]
