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

"""``openstack mlaccel record show``: a launch's life-cycle record.

A record is the JSON file ``mlaccel launch --output`` (or ``openstack
mlaccel launch --output``) writes (:mod:`mlaccel.launcher.record`). The
command shows the task's stage times, each VM's, and every boundary that
did not come from its defining event, as ``mlaccel launch`` prints them;
``openstack mlaccel launch`` shows its record the same way.
"""

import json

from cliff import columns
from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from mlaccel.launcher import record as launch_record
from mlaccel import lifecycle
from mlaccel.osc import common

STAGES = tuple(stage.value for stage in lifecycle.STAGES)
COLUMNS = ('launch_id', 'outcome', 'error', 'image', 'flavor', 'count',
           'task') + STAGES + ('total', 'vms', 'fallbacks', 'cleanup')


class VMs(columns.FormattableColumn):
    """Each VM's stage times: a line each for people, dicts for machines."""

    def human_readable(self):
        def seconds(value):
            return '-' if value is None else '%.3f' % value
        return '\n'.join(
            '%s: %s, total %s s; %s' % (
                vm['name'], ', '.join('%s %s' % (stage, seconds(vm[stage]))
                                      for stage in STAGES),
                seconds(vm['total']), vm['state'] or '-')
            for vm in self._value)

    def machine_readable(self):
        return list(self._value)


def _vm_rows(record):
    rows = []
    for vm in record['vms']:
        timeline = vm['timeline']
        row = {'name': vm['name'], 'server_id': vm.get('server_id'),
               'pool': vm.get('pool'), 'state': vm.get('state')}
        row.update((stage, timeline['durations'].get(stage))
                   for stage in STAGES)
        row['total'] = timeline['total']
        rows.append(row)
    return rows


def _fallbacks(record):
    """As :func:`mlaccel.launcher.record.format_table` notes them."""
    return ['%s: %s from %s %s (precision %g s)' % (
        vm['name'], event, boundary['source'], boundary['event'],
        boundary['precision'])
        for vm in record['vms']
        for event, boundary in launch_record.fallbacks(
            vm['timeline']).items()]


def show(record):
    """``(columns, values)`` of a record for a ``ShowOne`` command."""
    request = record.get('request') or {}
    task = record['timeline']
    values = (record['launch_id'], record['outcome'], record.get('error'),
              request.get('image'), request.get('flavor'),
              request.get('count'), request.get('entry'))
    values += tuple(common.Seconds(task['durations'].get(stage))
                    for stage in STAGES)
    values += (common.Seconds(task['total']), VMs(_vm_rows(record)),
               common.Lines(_fallbacks(record)),
               format_columns.DictColumn(record.get('cleanup') or {}))
    return COLUMNS, values


def load(path):
    """The record in the JSON file ``path``.

    :raises osc_lib.exceptions.CommandError: unreadable, or not a record.
    """
    try:
        with open(path) as stream:
            found = json.load(stream)
    except (OSError, UnicodeDecodeError) as exc:
        raise exceptions.CommandError('cannot read record %s: %s' % (
            path, getattr(exc, 'strerror', None) or exc))
    except ValueError as exc:
        raise exceptions.CommandError('record %s is not JSON: %s'
                                      % (path, common.one_line(exc)))
    try:
        show(found)
    except (AttributeError, KeyError, TypeError, ValueError):
        raise exceptions.CommandError(
            '%s is not a life-cycle record of mlaccel launch' % path)
    return found


class ShowRecord(command.ShowOne):
    """Show a launch's life-cycle record (a file of launch --output)."""

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'record', metavar='<record>',
            help='JSON file of the record, as "openstack mlaccel launch '
                 '--output" or "mlaccel launch --output" wrote it')
        return parser

    def take_action(self, parsed_args):
        return show(load(parsed_args.record))
