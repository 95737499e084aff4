"""Options of mlaccel-taskd, the warm task daemon that runs in a guest."""

from oslo_config import cfg

from mlaccel.tasks import clip

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
             'the shared token from token_file; the daemon refuses to '
             'start with a TCP address but without a token.'),
    cfg.StrOpt(
        'token_file',
        help='File holding the shared token that TCP clients must send in '
             'each request (surrounding white space is ignored). Keep it '
             'readable by the daemon\'s user only.'),
    cfg.ListOpt(
        'preload',
        default=[],
        help='Modules to import before the daemon reports ready, as '
             '"package.module" or "package.module:function". Name lazily '
             'imported modules explicitly: for the example task, "%s" '
             '(the first optimizer step imports torch._dynamo, which costs '
             'half of a cold start). A function after the colon is a '
             'warm-up hook, called without arguments when warmup is on. '
             'The daemon refuses to start, naming the module and the '
             'error, when any preload fails.' % ','.join(clip.PRELOAD)),
    cfg.BoolOpt(
        'warmup',
        default=True,
        help='Call the warm-up hooks named in preload. They run with torch '
             'limited to one thread (restored afterwards) so that no '
             'OpenMP thread pool exists when tasks are forked; a forked '
             'child would otherwise hang in it.'),
    cfg.StrOpt(
        'ready_url',
        help='HTTP URL to POST a JSON readiness notice to the moment the '
             'daemon is warm, typically given in the VM\'s user-data by the '
             'launcher, e.g. "http://10.0.0.5:7800/ready/<key>". The last '
             'path segment is echoed as "key". Unset: no notice.'),
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
        help='Most client connections served at once; each has its own '
             'thread. Further connections get a "busy" error and are '
             'closed.'),
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
        help='Default resource limits of forked tasks as '
             'name:value pairs, where name is a resource.RLIMIT_* suffix '
             'in lower case, e.g. "as:8589934592,nofile:4096,cpu:3600". A '
             'request may name its own limits, which replace these.'),
    cfg.StrOpt(
        'log_dir',
        default='/var/log/mlaccel/tasks',
        help='Directory of the per-task log files (<task id>.log) that '
             'receive the task\'s stdout and stderr.'),
]
