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

"""The OpenStackClient plugin module of mlaccel (``openstack mlaccel``).

OSC finds it through the ``openstack.cli.extension`` entry point and loads
the commands of the ``openstack.mlaccel.v1`` entry point group. mlaccel
has no REST API of its own: its commands reach Nova, Glance and Cinder
through the openstacksdk connection OSC makes, and read the state bus and
the pool store named by mlaccel's configuration file.
"""

from osc_lib import utils

API_NAME = 'mlaccel'
API_VERSION_OPTION = 'os_mlaccel_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = {'1': 'openstack.connection.Connection'}


def make_client(instance):
    """The client of ``openstack mlaccel``: OSC's openstacksdk connection.

    :param instance: OSC's ``ClientManager``.
    """
    instance.setup_auth()
    return instance.sdk_connection


def build_option_parser(parser):
    """Add the global option ``--os-mlaccel-api-version``."""
    parser.add_argument(
        '--os-mlaccel-api-version', metavar='<mlaccel-api-version>',
        default=utils.env('OS_MLACCEL_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='mlaccel command version, default=%s (Env: '
             'OS_MLACCEL_API_VERSION)' % DEFAULT_API_VERSION)
    return parser
