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

"""``mlaccel pool ...``: make, list, change and delete warm pools.

``mlaccel pool create`` makes a pool of the current project (names are
resolved to ids), ``list`` shows every pool with its size, bounds and
costs, ``members`` one pool's members (never their tokens), ``set``
changes bounds and reuse, ``delete`` removes an empty pool. Exit status 2
for bad usage, 1 for a failure.
"""

import argparse
import time

import openstack
from oslo_config import cfg
from oslo_utils import uuidutils

from mlaccel.cmd import common
from mlaccel.pool import claims
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import demand
from mlaccel.pool import learning
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store

PROG = 'mlaccel pool'


def _count(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError('expected an integer >= 0, got %r'
                                         % text)
    return int(text)


def add_common(parser):
    parser.add_argument('--cloud', help='cloud name in clouds.yaml')
    parser.add_argument('--config-file', action='append', default=[],
                        help='oslo.config file ([mlaccel_pool], '
                             '[mlaccel_statebus], [mlaccel_launcher])')
    parser.add_argument('--debug', action='store_true')


def build_parser():
    parser = argparse.ArgumentParser(
        prog='mlaccel pool', description='Warm pools of task VMs.')
    sub = parser.add_subparsers(dest='command', required=True)
    create = sub.add_parser('create', help='create a pool')
    create.add_argument('--image', required=True)
    create.add_argument('--flavor', required=True)
    create.add_argument('--network', default='none',
                        help='"none", "auto" or a network name or id')
    create.add_argument('--server-group')
    create.add_argument('--preload', help='comma-separated modules '
                        '(default: [mlaccel_launcher] preload)')
    create.add_argument('--taskd-port', type=_count)
    create.add_argument('--boot-volume-gb', type=_count,
                        help='members boot from a volume of this many GiB '
                             'made from the image (default: image-backed)')
    create.add_argument('--min', type=_count, default=0, dest='min_size')
    create.add_argument('--max', type=_count, required=True,
                        dest='max_size')
    create.add_argument('--max-tasks', type=_count,
                        help='tasks a member serves at most (default: '
                             '[mlaccel_pool] max_tasks)')
    sub.add_parser('list', help='pools, sizes and costs')
    members = sub.add_parser('members', help='members of one pool')
    members.add_argument('key')
    setter = sub.add_parser('set', help='change bounds or reuse')
    setter.add_argument('key')
    setter.add_argument('--min', type=_count, dest='min_size')
    setter.add_argument('--max', type=_count, dest='max_size')
    setter.add_argument('--max-tasks', type=_count)
    delete = sub.add_parser('delete', help='delete an empty pool')
    delete.add_argument('key')
    for each in (create, sub.choices['list'], members, setter, delete):
        add_common(each)
    return parser


def _create(conf, conn, store, args):
    # As "mlaccel launch" resolves them, so that its launches find the pool.
    image = args.image
    if not uuidutils.is_uuid_like(image):
        image = conn.image.find_image(image, ignore_missing=False).id
    flavor = conn.compute.find_flavor(args.flavor, ignore_missing=False).id
    group = None
    if args.server_group:
        group = conn.compute.find_server_group(args.server_group,
                                               ignore_missing=False).id
    launcher = conf.mlaccel_launcher
    preload = launcher.preload if args.preload is None else [
        m.strip() for m in args.preload.split(',') if m.strip()]
    project = claims.project_of(conn, conf.mlaccel_pool.project_id)
    if not project:
        raise ValueError('the project of the credentials is unknown: set '
                         '[mlaccel_pool] project_id to the project they act '
                         'in')
    spec = pool_spec.PoolSpec(
        project, image, flavor, preload=preload,
        server_group_id=group,
        network=common.networks(conn, args.network),
        taskd_port=args.taskd_port or launcher.taskd_port,
        boot_volume_gb=args.boot_volume_gb)
    state = pool_store.new_state(
        spec, args.min_size, args.max_size,
        args.max_tasks or conf.mlaccel_pool.max_tasks)
    if store.exists(spec.key):
        raise ValueError('a pool with this spec exists: %s' % spec.key)
    with store.transaction(spec.key, create=state):
        pass
    print(spec.key)


def _table(rows, columns):
    def cell(value):
        if isinstance(value, float):
            return '%.1f' % value
        return '-' if value is None else str(value)
    cells = [[cell(row[c]) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells])
              for i, c in enumerate(columns)]
    for line in [list(columns)] + cells:
        print('  '.join(v.ljust(w) for v, w in zip(line, widths)).rstrip())


def _list(conf, store):
    _table([pool_cli.summary(store.read(key), conf.mlaccel_pool)
            for key in store.keys()],
           ('key', 'origin', 'image', 'flavor', 'min', 'max', 'idle',
            'claimed', 'target', 'idle_vm_s', 'member_vm_s', 'tasks_served',
            'idle_vm_s_per_task', 'create_failures', 'paused_s'))
    group = conf.mlaccel_pool
    if group.learn:
        states = [store.read(key) for key in store.keys()]
        warm = sum(len(pool_store.members(s, pool_store.IDLE))
                   for s in states)
        print('budget: %d of %d warm members at once; learned pools for '
              'projects %s' % (warm, group.budget_members,
                               ', '.join(group.learn_projects) or 'none'))
        log = demand.DemandLog.from_conf(store, conf)
        now = time.time()
        for project in group.learn_projects:
            operators = sum(
                len(pool_store.members(s, pool_store.IDLE)) for s in states
                if not learning.is_learned(s)
                and pool_store.spec_of(s).project_id == project)
            hours = (demand.spent(log.read(project), now) / 3600.0
                     + 24.0 * operators)
            print('budget of %s: %.1f of %g idle VM-hours spent over the '
                  'last 24 hours (learned pools, and 24 per warm member of '
                  'an operator\'s pool): %s' % (
                      project, hours, group.budget_idle_vm_hours,
                      'within' if hours <= group.budget_idle_vm_hours + 1e-6
                      else 'EXCEEDED'))
        cap = learning.cloud_cap(group)
        if cap is not None:
            print('cloud budget: %d of %d members held by all projects\' '
                  'pools (warm, or a learned pool\'s target)'
                  % (sum(learning.held(s) for s in states), cap))


def _members(store, key):
    now = time.time()
    rows = [dict(m, idle_s=None if m['idle_since'] is None
                 else now - m['idle_since'])
            for m in pool_store.members(store.read(key))]
    _table(rows, ('server_id', 'name', 'state', 'tasks', 'idle_s',
                  'holder'))


def _set(store, args):
    with store.transaction(args.key) as state:
        bounds = state['bounds']
        min_size = bounds['min'] if args.min_size is None else args.min_size
        max_size = bounds['max'] if args.max_size is None else args.max_size
        max_tasks = state['max_tasks'] if args.max_tasks is None \
            else args.max_tasks
        pool_store.check_bounds(min_size, max_size, max_tasks)
        state['bounds'] = {'min': min_size, 'max': max_size}
        state['max_tasks'] = max_tasks


def main(argv=None):
    """``mlaccel pool ...`` (a command of the ``mlaccel`` script)."""
    args = build_parser().parse_args(argv)
    try:
        conf = pool_cli.configure(args.config_file, args.debug)
    except (cfg.Error, ValueError) as exc:
        return common.error(PROG, exc, common.USAGE)
    store = pool_cli.open_store(conf)
    try:
        if args.command == 'create':
            _create(conf, openstack.connect(cloud=args.cloud), store, args)
        elif args.command == 'list':
            _list(conf, store)
        elif args.command == 'members':
            _members(store, args.key)
        elif args.command == 'set':
            _set(store, args)
        else:
            store.delete(args.key)
    except (ValueError, pool_store.NoSuchPool) as exc:
        return common.error(PROG, exc, common.USAGE)
    except Exception as exc:
        return common.error(PROG, exc, common.FAILURE)
    finally:
        store.lock.stop()
    return 0
