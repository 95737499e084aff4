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

"""What the ``openstack mlaccel`` commands share: configuration, columns.

The commands that read the state bus or the pool store load mlaccel's
configuration file as the console scripts do, into ``mlaccel.conf.CONF``:
the files given with ``--config-file``, else ``$OS_MLACCEL_CONFIG_FILE``,
else oslo.config's search for ``mlaccel.conf`` (``~/.mlaccel/``, ``~/``,
``/etc/mlaccel/``, ``/etc/``). Unlike the scripts they leave logging to
OSC, so that stdout holds only the command's output.
"""

import os

from cliff import columns
from osc_lib import exceptions
from oslo_config import cfg

from mlaccel.cmd import common as cmd_common
from mlaccel import conf as mlaccel_conf
from mlaccel.statebus import url as bus_url

one_line = cmd_common.one_line

#: The environment variable naming the configuration file.
CONFIG_FILE_ENV = 'OS_MLACCEL_CONFIG_FILE'


def add_config_file_option(parser):
    """Add ``--config-file`` to a command's parser."""
    parser.add_argument(
        '--config-file', metavar='<path>', action='append', default=None,
        help='mlaccel configuration file; repeat for more (default: $%s, '
             'else mlaccel.conf in ~/.mlaccel, ~, /etc/mlaccel or /etc)'
             % CONFIG_FILE_ENV)
    return parser


def config_files(parsed_args):
    """The files to read, or ``None`` for oslo.config's search."""
    if parsed_args.config_file:
        return list(parsed_args.config_file)
    named = os.environ.get(CONFIG_FILE_ENV)
    return [named] if named else None


def _raw_url(conf):
    try:
        return conf.mlaccel_statebus.backend_url
    except Exception:
        return None


def load_config(parsed_args, *modules):
    """Load mlaccel's configuration and check the options of ``modules``.

    :param modules: option modules of :mod:`mlaccel.conf` (e.g.
        ``mlaccel.conf.pool``) whose every value must be valid.
    :returns: ``mlaccel.conf.CONF``.
    :raises osc_lib.exceptions.CommandError: a file is missing or
        unparsable, or a value is invalid.
    """
    conf = mlaccel_conf.CONF
    try:
        return cmd_common.read_config(config_files(parsed_args) or (),
                                      modules, conf)
    except cfg.ConfigFilesNotFoundError as exc:
        raise exceptions.CommandError(
            'configuration file not found: %s' % ', '.join(
                exc.config_files))
    except (cfg.Error, ValueError) as exc:
        raise exceptions.CommandError('configuration: %s' % one_line(
            bus_url.redact(exc, _raw_url(conf))))


class Seconds(columns.FormattableColumn):
    """Seconds: to the millisecond for people, as they are for machines."""

    FORMAT = '%.3f'

    def human_readable(self):
        return '-' if self._value is None else self.FORMAT % self._value

    def machine_readable(self):
        return self._value


class Tenths(Seconds):
    """A figure to a tenth for people, as it is for machines."""

    FORMAT = '%.1f'


class Lines(columns.FormattableColumn):
    """A list of strings, one a line for people, a list for machines."""

    def human_readable(self):
        return '\n'.join(self._value)

    def machine_readable(self):
        return list(self._value)
