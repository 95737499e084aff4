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

"""``mlaccel-agent``: the compute agent's command line.

Parses the options, sets up logging, runs the
:class:`~mlaccel.agent.service.Agent` until SIGTERM or SIGINT, reloading
the configuration's mutable options on SIGHUP and telling systemd when it
is ready (:mod:`mlaccel.daemon`). A configuration it cannot start with is
one line on stderr and exit status 2.
"""

import sys

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel.agent import service
from mlaccel.cmd import common
from mlaccel import daemon

LOG = logging.getLogger(__name__)

PROG = 'mlaccel-agent'


def main(argv=None):
    """Console script ``mlaccel-agent``."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        conf = service.parse_args(argv)
        logging.setup(conf, PROG)
        agent = service.Agent(conf)
    except (cfg.Error, service.ConfigError, OSError) as exc:
        return common.error(PROG, 'error: %s' % exc, common.USAGE)
    daemon.serve(conf, PROG, agent.start, agent.stop)
    return 0


if __name__ == '__main__':
    sys.exit(main())
