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

"""``mlaccel launch``: run a task on N fresh VMs and record its life cycle.

Example::

    mlaccel launch --cloud mycloud --image taskd-image --flavor m1.large \\
        --count 4 --network private --callback-host 10.0.0.2 \\
        --task clip --task-args '{"steps": 200}' \\
        --output record.json

Progress goes to stderr while the launch waits, the life-cycle table to
stdout. Exit status: 0 when every VM's task succeeded, 1 when the launch
failed, 2 for bad usage (bad arguments, a missing or unparsable
``--config-file``, an invalid option value: one line on stderr, nothing
created), 130 when interrupted (SIGINT or SIGTERM). In every case the
servers the launch made are deleted (unless ``--keep-servers`` and the task
succeeded).
"""

import argparse
import json
import os
import signal
import sys

import openstack
from oslo_config import cfg
from oslo_log import log as logging

from mlaccel.cmd import common
from mlaccel.cmd import pool as pool_cmd
from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.launcher import record
from mlaccel.pool import cli as pool_cli
from mlaccel.taskd import protocol

LOG = logging.getLogger(__name__)

PROG = 'mlaccel launch'
#: Kept for :mod:`mlaccel.osc.launch`, which calls it; see
#: :func:`mlaccel.cmd.common.networks`.


def _json_object(text):
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError('not valid JSON: %s' % exc)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('must be a JSON object')
    return value


def _listen(text):
    try:
        host, port = protocol.parse_tcp_address(text)
    except ValueError:
        raise argparse.ArgumentTypeError('expected HOST:PORT, got %r' % text)
    return host or '0.0.0.0', port


def _port(text):
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError('expected a port 0-65535, got %r'
                                         % text)
    return int(text)


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError('must be positive')
        return value
    return parse


def build_parser():
    parser = argparse.ArgumentParser(
        prog='mlaccel launch',
        description='Create a task\'s VMs, run the task in the warm task '
                    'daemon of each, collect the results, delete the VMs '
                    'and record scheduling, creation, buffering and '
                    'running times.')
    add = parser.add_argument
    add('--cloud', help='cloud name in clouds.yaml (default: OS_CLOUD or '
                        'the OS_* environment variables)')
    add('--image', required=True,
        help='image name or id; it must have mlaccel-taskd and cloud-init')
    add('--flavor', required=True, help='flavor name or id')
    add('--count', type=_positive(int), default=1, help='number of VMs')
    add('--network', default='none',
        help='"none", "auto" or a network name or id (default: none)')
    add('--server-group', help='server group name or id to boot into')
    add('--task', required=True, metavar='TASK',
        help='task submitted to every VM\'s task daemon: a registered task '
             'name (e.g. clip), or MODULE:FUNCTION where the daemons allow '
             'it')
    add('--task-args', type=_json_object, default={}, metavar='JSON',
        help='JSON object passed to the task')
    add('--threads', type=_positive(int), help='threads per task')
    add('--seed', type=int, help='random seed of the task')
    add('--mode', choices=('fork', 'worker'), default='fork',
        help='start the task by fork (default) or in a persistent worker')
    add('--output', metavar='PATH', help='write the record as JSON here')
    add('--timeout', type=_positive(float), default=1800.0,
        help='seconds for the whole launch, creation to results')
    add('--keep-servers', action=argparse.BooleanOptionalAction,
        default=False, help='keep the servers when the task succeeded')
    add('--pool', action=argparse.BooleanOptionalAction, default=True,
        help='take VMs from a matching warm pool first (default; see '
             '"mlaccel pool --help" and [mlaccel_pool] claim)')
    add('--listen', type=_listen, metavar='HOST:PORT',
        help='address of the readiness listener')
    add('--callback-host',
        help='host or address the VMs reach the readiness listener at')
    add('--taskd-port', type=_port, help='TCP port of taskd in the VMs')
    add('--preload', help='comma-separated modules taskd imports before it '
                          'reports ready')
    add('--poll-interval', type=_positive(float),
        help='seconds between status reads of the servers (fallback)')
    add('--max-parallelism', type=_positive(int),
        help='most server creations in flight')
    add('--config-file', action='append', default=[],
        help='oslo.config file with a [mlaccel_launcher] section')
    add('--quiet', action='store_true', help='no progress on stderr')
    add('--debug', action='store_true', help='debug logging')
    return parser


def _options(args):
    options = {'callback_host': args.callback_host,
               'taskd_port': args.taskd_port,
               'poll_interval': args.poll_interval,
               'max_parallelism': args.max_parallelism}
    if args.listen:
        options['listen_host'], options['listen_port'] = args.listen
    if args.preload is not None:
        options['preload'] = [m.strip() for m in args.preload.split(',')
                              if m.strip()]
    if args.max_parallelism:
        options['initial_parallelism'] = min(
            args.max_parallelism,
            mlaccel_conf.CONF.mlaccel_launcher.initial_parallelism)
    return options


def print_progress(snapshot, stream=None):
    """One progress line: how many VMs reached each phase."""
    stream = stream or sys.stderr
    stream.write(
        '[%7.1fs] launch %s: created %d/%d, active %d, ready %d, running %d, '
        'done %d (creations in flight <= %d)\n' % (
            snapshot['elapsed'], snapshot['launch_id'], snapshot['created'],
            snapshot['count'], snapshot['active'], snapshot['ready'],
            snapshot['running'], snapshot['done'], snapshot['limit']))
    stream.flush()


def _terminate(signum, frame):
    raise KeyboardInterrupt('signal %d' % signum)


def _check_output(path):
    """Refuse, before anything is created, a record path not writable."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError('--output %s is a directory' % path)
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise ValueError('--output: cannot write in %s' % directory)


def main(argv=None):
    args = build_parser().parse_args(argv)
    conf = mlaccel_conf.CONF
    submit = {'mode': args.mode}
    if args.threads:
        submit['threads'] = args.threads
    if args.seed is not None:
        submit['seed'] = args.seed
    try:
        common.load_config(args.config_file, 'mlaccel-launch',
                           debug=args.debug,
                           modules=(mlaccel_conf.launcher,), conf=conf)
        protocol.TaskSpec(args.task, args.task_args, **submit)
        if args.output:
            _check_output(args.output)
    except (ValueError, cfg.Error, OSError) as exc:
        return common.error(PROG, common.one_line(exc), common.USAGE)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        conn = openstack.connect(cloud=args.cloud)
        warm_pool = pool_cli.claimer(conf, conn) if args.pool else None
        result = api.launch(
            conn, args.image, args.flavor, args.count, args.task,
            args.task_args, network=common.networks(conn, args.network),
            server_group=args.server_group, timeout=args.timeout,
            keep_servers=args.keep_servers, submit_options=submit,
            progress=None if args.quiet else print_progress, conf=conf,
            warm_pool=warm_pool, **_options(args))
        status = 0 if result['outcome'] == api.SUCCEEDED else 1
    except api.LaunchInterrupted as exc:
        result, status = exc.record, 130
    except (ValueError, TypeError, cfg.Error) as exc:
        return common.error(PROG, common.one_line(exc), common.USAGE)
    except Exception as exc:
        # Raised before any server was made: connection, lookups.
        return common.error(PROG, common.one_line(exc), common.FAILURE)
    if args.output:
        try:
            record.write_json(result, args.output)
        except OSError as exc:
            sys.stderr.write('mlaccel launch: cannot write the record: %s\n'
                             % common.one_line(exc))
            status = status or 1
    sys.stdout.write(record.format_table(result))
    if result['error']:
        sys.stderr.write('mlaccel launch: %s: %s\n'
                         % (result['outcome'], result['error']))
    leaked = result['cleanup'].get('leaked')
    if leaked:
        sys.stderr.write('mlaccel launch: servers NOT deleted: %s\n'
                         % ', '.join(leaked))
        status = status or 1
    return status


USAGE = (
    'usage: mlaccel launch [options]\n\n'
    'Commands:\n'
    '  launch    create a task\'s VMs, run the task in each VM\'s warm task\n'
    '            daemon, delete the VMs and record the life cycle\n'
    '            ("mlaccel launch --help" for its options)\n'
    '  pool      warm pools of task VMs: create, list, members, set,\n'
    '            delete ("mlaccel pool --help")\n')


def cli(argv=None):
    """Console script ``mlaccel``: ``mlaccel launch ...``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (['-h'], ['--help'], ['help']):
        sys.stdout.write(USAGE)
        return 0
    if argv[:1] == ['pool']:
        return pool_cmd.main(argv[1:])
    if not argv or argv[0] != 'launch':
        sys.stderr.write('mlaccel: %s; try "mlaccel --help"\n' % (
            'unknown command %r' % argv[0] if argv else 'no command'))
        return 2
    return main(argv[1:])


if __name__ == '__main__':
    sys.exit(main())
