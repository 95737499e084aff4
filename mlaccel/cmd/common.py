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

"""What mlaccel's console scripts share: configuration, logging, errors.

Each script loads its oslo.config files with :func:`load_config` (a
missing file is an error, not silently skipped; a bad option value fails
at start, not at first use), reports a failure as one line ``prog:
message`` on stderr with :func:`error` and exits with its status: 2 for
bad usage or configuration, 1 for a failure.
"""

import os
import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import uuidutils

from mlaccel import conf as mlaccel_conf

#: Exit status of bad usage: arguments, configuration, option values.
USAGE = 2
#: Exit status of a failure.
FAILURE = 1


def read_config(config_files, modules=(), conf=None):
    """Load ``config_files`` into ``conf`` (no logging); return ``conf``.

    :param config_files: paths; empty: oslo.config's search for
        ``mlaccel.conf``.
    :param modules: option modules of :mod:`mlaccel.conf` (with ``GROUP``
        and ``OPTS``) whose values are checked now.
    :raises cfg.Error: a missing or unparsable file, a bad value.
    """
    conf = conf or mlaccel_conf.CONF
    for path in config_files:
        if not os.path.isfile(path):
            raise cfg.ConfigFilesNotFoundError([path])
    conf(args=[], project='mlaccel',
         default_config_files=list(config_files) or None)
    for module in modules:  # bad values fail here, not later
        for opt in module.OPTS:
            getattr(getattr(conf, module.GROUP.name), opt.dest)
    return conf


def load_config(config_files, name, *, debug=False, modules=(), conf=None):
    """:func:`read_config` with oslo.log's options, then set up logging."""
    conf = conf or mlaccel_conf.CONF
    logging.register_options(conf)
    conf = read_config(config_files, modules, conf)
    conf.set_override('debug', debug)
    logging.setup(conf, name)
    return conf


def one_line(exc):
    """``exc``'s message on one line (its type when it has none)."""
    return ' '.join(str(exc).split()) or type(exc).__name__


def error(prog, message, status=FAILURE):
    """Write ``prog: message`` on stderr; return ``status``."""
    sys.stderr.write('%s: %s\n' % (prog, message))
    return status


def networks(conn, network):
    """A ``--network`` argument as Nova's ``networks`` of a new server.

    ``none`` and ``auto`` as they are, a network name or id as ``[{'uuid':
    id}]``.
    """
    if network in ('none', 'auto'):
        return network
    if not uuidutils.is_uuid_like(network):
        network = conn.network.find_network(network, ignore_missing=False).id
    return [{'uuid': network}]
