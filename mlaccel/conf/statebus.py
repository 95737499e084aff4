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
        help='tooz backend URL of the state bus. The file backend '
             '(file:///path) suits a single node or a shared file system; '
             'use redis://, etcd3+http:// or zookeeper:// across nodes. '
             'Liveness timeouts are set the tooz way in the URL, e.g. '
             '"redis://127.0.0.1:6379?timeout=5".'),
    cfg.StrOpt(
        'group',
        default='mlaccel.hosts',
        help='tooz group that every agent joins with its host report as '
             'the member capabilities.'),
    cfg.FloatOpt(
        'refresh_interval',
        default=2.0,
        min=0.1,
        help='Seconds between two reads of all host reports by the '
             'scheduler-side cache. Each refresh is one call to the bus, '
             'made by a background thread; scheduling never waits for it.'),
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
