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

"""``mlaccel-taskd``: the warm task daemon's command line.

Parses the options (oslo.config, with the command-line overrides below),
sets up logging, starts the :class:`~mlaccel.taskd.daemon.Daemon` and
drains it on SIGTERM or SIGINT. A daemon that cannot start says why in
one line on stderr and exits with code 2.
"""

import signal
import sys

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel.cmd import common
from mlaccel import conf as mlaccel_conf
from mlaccel.taskd import daemon as taskd_daemon
from mlaccel.taskd import preload
from mlaccel.taskd import server

LOG = logging.getLogger(__name__)

PROG = 'mlaccel-taskd'

CLI_OPTS = [
    cfg.StrOpt('ready-url', help='Override [mlaccel_taskd] ready_url.'),
    cfg.StrOpt('socket', help='Override [mlaccel_taskd] socket_path.'),
    cfg.StrOpt('tcp', help='Override [mlaccel_taskd] tcp_address.'),
    cfg.StrOpt('token-file', help='Override [mlaccel_taskd] token_file.'),
    cfg.ListOpt('preload', help='Override [mlaccel_taskd] preload.'),
    cfg.StrOpt('task-log-dir', help='Override [mlaccel_taskd] log_dir.'),
]
_OVERRIDES = {'ready_url': 'ready_url', 'socket': 'socket_path',
              'tcp': 'tcp_address', 'token_file': 'token_file',
              'preload': 'preload', 'task_log_dir': 'log_dir'}


def main(argv=None):
    """Console script ``mlaccel-taskd``."""
    # Blocked before any thread exists, so that only sigwait() below sees
    # them; children unblock them again.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    conf = mlaccel_conf.CONF
    try:
        logging.register_options(conf)
        conf.register_cli_opts(CLI_OPTS)
        conf(sys.argv[1:] if argv is None else argv, project='mlaccel',
             prog=PROG)
        for cli_name, opt_name in _OVERRIDES.items():
            value = conf[cli_name]
            if value is not None:
                conf.set_override(opt_name, value, group='mlaccel_taskd')
        logging.setup(conf, PROG)
    except (cfg.Error, ValueError, OSError) as exc:
        return common.error(
            PROG, str(exc).strip().splitlines()[0] if str(exc).strip()
            else type(exc).__name__, common.USAGE)
    daemon = taskd_daemon.Daemon(conf)
    try:
        daemon.start()
    except (preload.PreloadError, server.StartupError, OSError) as exc:
        LOG.error('%s cannot start: %s', PROG, exc)
        return common.error(PROG, 'cannot start: %s' % exc, common.USAGE)
    signum = signal.sigwait({signal.SIGTERM, signal.SIGINT})
    LOG.info('Got %s; draining', signal.Signals(signum).name)
    daemon.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
