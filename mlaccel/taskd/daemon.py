"""mlaccel-taskd: preload, listen, push readiness, serve, drain."""

import os
import signal
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel.taskd import manager
from mlaccel.taskd import preload
from mlaccel.taskd import protocol
from mlaccel.taskd import readiness
from mlaccel.taskd import server

LOG = logging.getLogger(__name__)

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


class Daemon:
    """The daemon's parts put together; ``start()`` then ``stop()``."""

    def __init__(self, conf):
        self.group = conf.mlaccel_taskd
        self.manager = manager.TaskManager(self.group)
        self.server = None
        self.preloaded = []
        self.ready_at = None

    def start(self):
        """Preload, listen, fork the workers, serve, push readiness.

        Raises :class:`preload.PreloadError` or :class:`server.StartupError`
        with a message fit for the operator.
        """
        started = time.time()
        self.preloaded = preload.preload(self.group.preload,
                                         self.group.warmup)
        os.makedirs(self.group.log_dir, mode=0o750, exist_ok=True)
        self.server = server.Server(self.group, self.handle,
                                    token=self._read_token())
        try:
            addresses = self.server.bind()
            # Fork the workers while the daemon still has a single thread.
            self.manager.start_workers()
        except BaseException:
            self.server.close()
            raise
        self.server.start()
        self.ready_at = time.time()
        LOG.info('Ready in %.2f s on %s; preloaded %s',
                 self.ready_at - started, ', '.join(addresses),
                 ', '.join(self.preloaded) or 'nothing')
        if self.group.ready_url:
            threading.Thread(target=self._push_ready, args=(addresses,),
                             daemon=True, name='ready-push').start()

    def _read_token(self):
        if not self.group.token_file:
            return None
        try:
            with open(self.group.token_file) as token_file:
                token = token_file.read().strip()
        except OSError as exc:
            raise server.StartupError('cannot read the token file: %s' % exc)
        if not token:
            raise server.StartupError('the token file %s is empty'
                                      % self.group.token_file)
        return token

    def _push_ready(self, addresses):
        url = self.group.ready_url
        address = addresses[-1]
        if address.startswith('tcp:'):
            host, port = protocol.parse_tcp_address(address[4:])
            if host in readiness.UNSPECIFIED:
                address = protocol.format_tcp_address(
                    readiness.reachable_host(url), port)
        readiness.push(url, readiness.notice(
            url, address, self.ready_at, self.preloaded, os.getpid()),
            attempts=self.group.ready_attempts)

    def stop(self):
        """Drain the tasks, stop the workers, close and remove the socket."""
        self.manager.drain(self.group.grace_period)
        if self.server is not None:
            self.server.close()
        LOG.info('Stopped')

    def handle(self, request):
        """Serve one validated request; return the reply fields."""
        op, rid = request['op'], request.get('id')
        if op == 'health':
            return dict(self.manager.counts(),
                        state='draining' if self.manager.draining
                        else 'ready',
                        pid=os.getpid(), protocol=protocol.VERSION,
                        addresses=self.server.addresses,
                        preloaded=self.preloaded, ready_at=self.ready_at)
        if op == 'submit':
            return {'task': self.manager.submit(
                protocol.TaskSpec.from_wire(request), rid).status()}
        task = self.manager.get(request['task'], rid)
        if op == 'wait':
            timeout = request.get('timeout')
            timeout = protocol.MAX_WAIT if timeout is None else min(
                timeout, protocol.MAX_WAIT)
            finished = task.done.wait(timeout)
            return {'task': task.status(), 'timed_out': not finished}
        if op == 'cancel':
            self.manager.cancel(task)
        elif op == 'logs':
            text, truncated = self.manager.logs(task, request.get('tail'))
            return {'logs': text, 'truncated': truncated}
        return {'task': task.status()}


def main(argv=None):
    """Console script ``mlaccel-taskd``."""
    # Blocked before any thread exists, so that only sigwait() below sees
    # them; children unblock them again.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    conf = mlaccel_conf.CONF
    logging.register_options(conf)
    conf.register_cli_opts(CLI_OPTS)
    conf(sys.argv[1:] if argv is None else argv, project='mlaccel',
         prog='mlaccel-taskd')
    logging.setup(conf, 'mlaccel-taskd')
    for cli_name, opt_name in _OVERRIDES.items():
        value = conf[cli_name]
        if value is not None:
            conf.set_override(opt_name, value, group='mlaccel_taskd')
    daemon = Daemon(conf)
    try:
        daemon.start()
    except (preload.PreloadError, server.StartupError, OSError) as exc:
        LOG.error('mlaccel-taskd cannot start: %s', exc)
        print('mlaccel-taskd: cannot start: %s' % exc, file=sys.stderr)
        return 2
    signum = signal.sigwait({signal.SIGTERM, signal.SIGINT})
    LOG.info('Got %s; draining', signal.Signals(signum).name)
    daemon.stop()
    return 0
