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

"""mlaccel-taskd: check options, preload, listen, push readiness, serve.

Every option is checked before anything touches the disk; a daemon that
cannot start says why in one line on stderr, exits with code 2 and leaves
nothing behind (no socket, no directory it made).
"""

import ipaddress
import os
import site
import ssl
import stat
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel.conf import taskd as taskd_conf
from mlaccel import readiness as notices
from mlaccel.taskd import catalog
from mlaccel.taskd import manager
from mlaccel.taskd import preload
from mlaccel.taskd import protocol
from mlaccel.taskd import ready_push
from mlaccel.taskd import runner
from mlaccel.taskd import server
from mlaccel import tls

LOG = logging.getLogger(__name__)


def check_values(group):
    """Convert every option of ``group`` now, not at first use.

    oslo.config converts a value when it is read: ``grace_period = abc``
    would otherwise pass the start and fail at SIGTERM.
    """
    for opt in taskd_conf.OPTS:
        try:
            getattr(group, opt.dest)
        except (ValueError, cfg.Error) as exc:
            # oslo.config names the option and where it was read at length.
            reason = str(exc).rpartition(' is not valid: ')[2]
            raise server.StartupError('invalid value for [mlaccel_taskd] '
                                      '%s: %s' % (opt.dest, reason))


def _private_file(path, what):
    """Refuse ``path`` unless only its owner (us or root) may use it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise server.StartupError('cannot read the %s: %s' % (what, exc))
    if not stat.S_ISREG(st.st_mode):
        raise server.StartupError('the %s %s is not a regular file'
                                  % (what, path))
    if st.st_mode & 0o077:
        raise server.StartupError(
            'the %s %s has mode %04o: group and others must have no access '
            '(chmod 600 it)' % (what, path, stat.S_IMODE(st.st_mode)))
    if st.st_uid not in (os.geteuid(), 0):
        raise server.StartupError('the %s %s is owned by uid %d, not by '
                                  'the daemon\'s user or root'
                                  % (what, path, st.st_uid))


def _writable_by(path, user):
    """True if ``user`` may change what is at ``path`` (no ACLs looked at)."""
    st = os.stat(path)
    if st.st_uid == user.uid:
        return True       # the owner may chmod it
    if st.st_gid in user.groups:
        return bool(st.st_mode & stat.S_IWGRP)
    return bool(st.st_mode & stat.S_IWOTH)


def _check_code_is_read_only(user):
    """Refuse to start when the task user could change the daemon's code.

    Every directory (or zip file) Python imports from and the home of the
    user site directory must not be writable by ``user``, nor any
    directory above them, bar a sticky one (/tmp): a task could otherwise
    plant a module or ``.pth`` file that a restarted daemon would run.
    """
    roots = [entry or os.getcwd() for entry in sys.path]
    if site.ENABLE_USER_SITE:
        roots.append(os.path.expanduser('~'))
    for root in roots:
        path = os.path.abspath(root)
        if not os.path.exists(path):
            continue
        if _writable_by(path, user):
            raise server.StartupError(
                'task_user %s may write to %s, where the daemon imports '
                'from: make it read-only to that user' % (user.name, path))
        while path != os.path.dirname(path):
            path = os.path.dirname(path)
            if _writable_by(path, user) and not (
                    os.stat(path).st_mode & stat.S_ISVTX):
                raise server.StartupError(
                    'task_user %s may write to %s, above %s where the '
                    'daemon imports from: make it read-only to that user'
                    % (user.name, path, root))


def _is_loopback(host):
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings:
    """What the options name, checked and loaded before the daemon starts.

    Raises :class:`server.StartupError` with a message fit for the
    operator; touches nothing on disk.
    """

    def __init__(self, group):
        check_values(group)
        try:
            preload.parse(group.preload)
        except preload.PreloadError as exc:
            raise server.StartupError(str(exc))
        try:
            self.limits = runner.parse_limits(group.task_limits)
            self.catalog = catalog.Catalog(group.allowed_tasks)
        except ValueError as exc:
            raise server.StartupError(str(exc))
        self.user = self._task_user(group.task_user)
        self.token = self._read_token(group.token_file)
        self.tls_context = self._tls(group)
        self.tcp = None
        if group.tcp_address:
            try:
                self.tcp = protocol.parse_tcp_address(group.tcp_address)
            except ValueError as exc:
                raise server.StartupError(str(exc))
            if not self.token:
                raise server.StartupError('a TCP address needs a token: set '
                                          'token_file')
            if (self.tls_context is None and not _is_loopback(self.tcp[0])
                    and not group.insecure_tcp):
                raise server.StartupError(
                    'the TCP address %s is not loopback: set tls_cert_file '
                    'and tls_key_file (or insecure_tcp = true to send the '
                    'token in clear text)' % group.tcp_address)
        if group.ready_url:
            scheme = group.ready_url.partition(':')[0].lower()
            if scheme not in ('http', 'https'):
                raise server.StartupError('ready_url %s is not an http(s) '
                                          'URL' % group.ready_url)
            if scheme == 'https' and not group.ready_cafile:
                raise server.StartupError('an https ready_url needs '
                                          'ready_cafile')
            if group.ready_cafile and not os.access(group.ready_cafile,
                                                    os.R_OK):
                raise server.StartupError('cannot read ready_cafile %s'
                                          % group.ready_cafile)

    @staticmethod
    def _task_user(name):
        """The :class:`runner.TaskUser` to drop to, or None (ourselves)."""
        user = None
        if name:
            try:
                user = runner.TaskUser.lookup(name)
            except KeyError:
                raise server.StartupError('task_user %s does not exist'
                                          % name)
            if user.uid == os.geteuid():
                user = None       # already that user
            elif os.geteuid() != 0:
                raise server.StartupError(
                    'task_user %s needs a daemon running as root (it runs '
                    'as uid %d)' % (name, os.geteuid()))
            else:
                _check_code_is_read_only(user)
        if user is None:
            LOG.warning('Tasks run as the daemon\'s own user (uid %d): a '
                        'task can signal the daemon and change what it '
                        'owns, and so reach later tasks. Run the daemon as '
                        'root with task_user set to an unprivileged user',
                        os.geteuid())
        return user

    @staticmethod
    def _read_token(path):
        if not path:
            return None
        _private_file(path, 'token file')
        try:
            with open(path) as token_file:
                token = token_file.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise server.StartupError('cannot read the token file: %s'
                                      % exc)
        if not token:
            raise server.StartupError('the token file %s is empty' % path)
        return token

    @staticmethod
    def _tls(group):
        cert, key = group.tls_cert_file, group.tls_key_file
        if not cert and not key:
            return None
        if not (cert and key):
            raise server.StartupError('set both tls_cert_file and '
                                      'tls_key_file, or neither')
        _private_file(key, 'TLS key file')
        try:
            return tls.server_context(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise server.StartupError('cannot load the TLS certificate %s '
                                      'and key %s: %s' % (cert, key, exc))


def _makedirs(path, mode):
    """Create ``path`` and missing parents; return the ones created."""
    created = []
    path = os.path.abspath(path)
    while not os.path.isdir(path):
        created.append(path)
        path = os.path.dirname(path)
    for directory in reversed(created):
        os.mkdir(directory, mode)
    return created


def _let_traverse(directory, user):
    """Let ``user`` reach the task logs in ``directory`` (group x)."""
    st = os.stat(directory)
    if st.st_gid != user.gid or not st.st_mode & stat.S_IXGRP:
        if not st.st_mode & stat.S_IXOTH:
            os.chown(directory, -1, user.gid)
            os.chmod(directory, stat.S_IMODE(st.st_mode) | stat.S_IXGRP)
            LOG.info('Task log directory %s: group %d may traverse it',
                     directory, user.gid)


class Daemon:
    """The daemon's parts put together; ``start()`` then ``stop()``."""

    def __init__(self, conf):
        self.group = conf.mlaccel_taskd
        self.manager = None
        self.server = None
        self.settings = None
        self.preloaded = []
        self.preload_s = None
        self.ready_at = None

    def start(self):
        """Check, preload, listen, fork the workers, serve, push readiness.

        Raises :class:`preload.PreloadError` or :class:`server.StartupError`
        with a message fit for the operator; then nothing is left on disk.
        """
        started = time.time()
        self.settings = settings = Settings(self.group)
        self.preloaded = preload.preload(self.group.preload,
                                         self.group.warmup)
        self.preload_s = time.time() - started
        self.manager = manager.TaskManager(self.group, settings.catalog,
                                           settings.user)
        created = []
        try:
            created += _makedirs(self.group.log_dir, 0o750)
            if settings.user is not None:
                _let_traverse(self.group.log_dir, settings.user)
            created += _makedirs(
                os.path.dirname(os.path.abspath(self.group.socket_path)),
                0o755)
            self.server = server.Server(self.group, self.handle,
                                        token=settings.token,
                                        tls_context=settings.tls_context,
                                        on_rekey=self.manager.renew_workers)
            addresses = self.server.bind()
            # Fork the workers while the daemon still has a single thread.
            self.manager.start()
        except BaseException:
            if self.server is not None:
                self.server.close()
            for directory in created:
                try:
                    os.rmdir(directory)
                except OSError:
                    pass
            raise
        self.server.start()
        self.ready_at = time.time()
        LOG.info('Ready in %.2f s (preload %.2f s) on %s; preloaded %s',
                 self.ready_at - started, self.preload_s,
                 ', '.join(addresses), ', '.join(self.preloaded) or 'nothing')
        if self.group.ready_url:
            threading.Thread(target=self._push_ready, args=(addresses,),
                             daemon=True, name='ready-push').start()

    def _push_ready(self, addresses):
        url = self.group.ready_url
        address = addresses[-1]
        try:
            if address.startswith('tcp:'):
                host, port = protocol.parse_tcp_address(address[4:])
                if host in ready_push.UNSPECIFIED:
                    address = protocol.format_tcp_address(
                        ready_push.reachable_host(url), port)
            ready_push.push(url, notices.notice(
                url, address, self.ready_at, self.preloaded, os.getpid()),
                token=self.settings.token, cafile=self.group.ready_cafile,
                attempts=self.group.ready_attempts)
        except Exception:
            LOG.exception('Readiness push to %s failed', url)

    def stop(self):
        """Drain the tasks, stop the workers, close and remove the socket."""
        try:
            self.manager.drain(self.group.grace_period)
        finally:
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
                        preloaded=self.preloaded, preload_s=self.preload_s,
                        ready_at=self.ready_at)
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
