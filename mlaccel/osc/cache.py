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

"""``openstack mlaccel cache list``: the mirror-volume cache's golden volumes.

Golden volumes are volumes of Cinder's internal tenant marked with their
image's id, so the command runs with credentials scoped to that project
(a clouds.yaml entry, or ``--os-project-id``), as ``mlaccel-cinder-cache
list`` does. It lists them through Cinder's API with
:func:`mlaccel.cmd.cinder_cache.golden_volumes`, on OSC's openstacksdk
connection: the script's own code, which already uses openstacksdk.
"""

from osc_lib.command import command
from osc_lib import exceptions

from mlaccel.cmd import cinder_cache
from mlaccel.osc import common

#: As ``mlaccel-cinder-cache list --json`` names them.
COLUMNS = ('image_id', 'volume_id', 'host', 'size_gb', 'status', 'pinned',
           'fill_seconds')


def golden_rows(conn, image=None):
    """One dict per golden volume (of ``image``), by image and backend.

    The rows of ``mlaccel-cinder-cache list``.
    """
    rows = [{'image_id': v['metadata'][cinder_cache.IMAGE_KEY],
             'volume_id': v['id'], 'host': v.get(cinder_cache.HOST_ATTR),
             'size_gb': v['size'], 'status': v['status'],
             'pinned': v['metadata'].get(cinder_cache.PINNED_KEY) == 'true',
             'fill_seconds': float(v['metadata'].get(cinder_cache.COST_KEY)
                                   or 0)}
            for v in cinder_cache.golden_volumes(conn, image)]
    rows.sort(key=lambda r: (r['image_id'], r['host'] or ''))
    return rows


class ListCache(command.Lister):
    """List the golden volumes of the mirror-volume cache."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--image', metavar='<image-id>',
                            help='only the golden volumes of this image')
        return parser

    def take_action(self, parsed_args):
        conn = self.app.client_manager.sdk_connection
        try:
            rows = golden_rows(conn, parsed_args.image)
        except cinder_cache.Failure as exc:
            raise exceptions.CommandError(common.one_line(exc))
        return COLUMNS, [tuple(common.Tenths(r[c]) if c == 'fill_seconds'
                               else r[c] for c in COLUMNS) for r in rows]
