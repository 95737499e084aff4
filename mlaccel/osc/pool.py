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

"""``openstack mlaccel pool list`` and ``pool show``: the warm pools.

Both read the pool store of ``[mlaccel_pool] state_dir`` as ``mlaccel pool
list`` and ``mlaccel pool members`` do (:mod:`mlaccel.pool.cli`), without
taking a lock and without the cloud. Members' tokens are never shown.
"""

import time

from cliff import columns
from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from mlaccel import conf as mlaccel_conf
from mlaccel.osc import common
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import store as pool_store

#: As ``mlaccel pool list`` shows them.
LIST_COLUMNS = ('key', 'origin', 'image', 'flavor', 'min', 'max', 'idle',
                'claimed', 'target', 'idle_vm_s', 'member_vm_s',
                'tasks_served', 'idle_vm_s_per_task', 'create_failures',
                'paused_s')
#: Of :func:`mlaccel.pool.cli.summary`, shown to a tenth.
FIGURES = frozenset(('rate_per_s', 'lead_time_s', 'idle_vm_s',
                     'idle_vm_s_per_task', 'member_vm_s',
                     'member_vm_s_per_task', 'paused_s'))
#: As ``mlaccel pool members`` shows them.
MEMBER_FIELDS = ('server_id', 'name', 'state', 'tasks', 'idle_s', 'holder')


class Members(columns.FormattableColumn):
    """A pool's members: a line each for people, dicts for machines."""

    def human_readable(self):
        return '\n'.join(
            '%s (%s): %s, %s tasks%s' % (
                m['server_id'], m['name'], m['state'], m['tasks'],
                '' if m['idle_s'] is None else ', idle %.1f s' % m['idle_s'])
            for m in self._value)

    def machine_readable(self):
        return list(self._value)


def _value(name, value):
    return common.Tenths(value) if name in FIGURES else value


def _members(state, now):
    return [dict({field: m.get(field) for field in MEMBER_FIELDS},
                 idle_s=None if m['idle_since'] is None
                 else now - m['idle_since'])
            for m in pool_store.members(state)]


class _PoolCommand:
    """Reads the pool store of the configuration file."""

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_config_file_option(parser)
        return parser

    def _with_store(self, parsed_args, read):
        conf = common.load_config(parsed_args, mlaccel_conf.pool)
        store = pool_cli.open_store(conf)
        try:
            return read(conf, store)
        except pool_store.NoSuchPool as exc:
            raise exceptions.CommandError('no pool %s' % exc.args[0])
        except (OSError, ValueError) as exc:
            raise exceptions.CommandError(common.one_line(exc))
        finally:
            store.lock.stop()


class ListPool(_PoolCommand, command.Lister):
    """List the warm pools with their sizes, bounds and costs."""

    def take_action(self, parsed_args):
        def read(conf, store):
            return [pool_cli.summary(store.read(key), conf.mlaccel_pool)
                    for key in store.keys()]
        rows = self._with_store(parsed_args, read)
        return LIST_COLUMNS, [tuple(_value(c, row[c]) for c in LIST_COLUMNS)
                              for row in rows]


class ShowPool(_PoolCommand, command.ShowOne):
    """Show one warm pool: its spec, sizes, costs and members."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('key', metavar='<key>',
                            help='the pool\'s key (see "pool list")')
        return parser

    def take_action(self, parsed_args):
        def read(conf, store):
            state = store.read(parsed_args.key)
            now = time.time()
            return (pool_cli.summary(state, conf.mlaccel_pool, now),
                    state, now)
        summary, state, now = self._with_store(parsed_args, read)
        names = tuple(summary) + ('spec', 'members')
        values = tuple(_value(name, summary[name]) for name in summary) + (
            format_columns.DictColumn(state['spec']),
            Members(_members(state, now)))
        return names, values
