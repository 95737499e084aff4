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

"""``openstack mlaccel host report list``: the host reports on the state bus.

It reads the bus of ``[mlaccel_statebus]`` once, with the report cache the
scheduler plugins use (:class:`mlaccel.statebus.reader.ReportCache`), as
``mlaccel-statebus show`` does: only the reports the scheduler would use
(signed with a key of the deployment key file, unless
``allow_unsigned_reports``), each with its age, whether it is fresh, and
the id of the key that signed it.
"""

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions

from mlaccel.cmd import statebus as statebus_cmd
from mlaccel import conf as mlaccel_conf
from mlaccel.osc import common

COLUMNS = ('host', 'age_s', 'fresh', 'images', 'builds', 'limit', 'key_id')
LONG_COLUMNS = ('cache_free_bytes', 'fetch_bandwidth', 'build_throughput',
                'agent_version')


class KeyId(columns.FormattableColumn):
    """The id of the key a report was signed with; ``None``: unsigned."""

    def human_readable(self):
        return '(unsigned)' if self._value is None else self._value

    def machine_readable(self):
        return self._value


def read_reports(conf):
    """``(snapshot, reports by host, key_id)`` of one read of the bus.

    :raises osc_lib.exceptions.CommandError: the bus cannot be read.
    """
    try:
        cache = statebus_cmd.read_bus(conf)
    except statebus_cmd.Failure as exc:
        raise exceptions.CommandError(str(exc))
    snapshot = cache.current()
    reports = sorted(snapshot.reports.values(), key=lambda r: r.host)
    return snapshot, reports, cache.key_id


class ListHostReport(command.Lister):
    """List the host reports the scheduler sees on the state bus."""

    auth_required = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_config_file_option(parser)
        parser.add_argument('--long', action='store_true', default=False,
                            help='also free cache bytes, fetch bandwidth, '
                                 'build throughput and agent version')
        return parser

    def take_action(self, parsed_args):
        conf = common.load_config(parsed_args, mlaccel_conf.statebus)
        snapshot, reports, key_id = read_reports(conf)
        names = COLUMNS + (LONG_COLUMNS if parsed_args.long else ())
        rows = []
        for r in reports:
            row = (r.host, common.Tenths(r.age(snapshot.now)),
                   snapshot.get(r.host) is not None, len(r.cached_images),
                   r.builds_in_flight, r.build_limit, KeyId(key_id(r.host)))
            if parsed_args.long:
                row += (r.cache_free_bytes, r.fetch_bandwidth,
                        r.build_throughput, r.agent_version)
            rows.append(row)
        return names, rows
