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

"""Running one task inside a forked child or a persistent worker.

Everything here runs in a process forked from the daemon. The child drops
what it inherited (signal mask and handlers, the daemon's sockets and
pipes), starts a session of its own in which it adopts the orphans of its
descendants, sets its resource limits (soft and hard), drops to the task
user if there is one, then runs the task in a per-task context: log file,
environment, thread count, working directory, seeds. When the task returns,
what it left behind is killed and reaped. Events go back to the daemon as
JSON lines on a pipe: ``first_step``, then ``result`` or ``error``. A
forked child always ends with ``os._exit``.
"""

import contextlib
import dataclasses
import functools
import importlib
import json
import logging
import os
import pwd
import random
import resource
import signal
import stat
import sys
import traceback

from mlaccel.taskd import processes
from mlaccel.taskd import protocol
from mlaccel import tasks

THREAD_ENV = ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS')
_MAX_ERROR_CHARS = 2000


def resolve(entry):
    """The function named by ``"package.module:function"``."""
    module_name, _, func_name = entry.partition(':')
    module = importlib.import_module(module_name)
    return getattr(module, func_name) if func_name else module


def job(task_id, spec, target, log_path):
    """What a child or worker is given to run: a JSON-able dict.

    ``spec`` is the task's :class:`protocol.TaskSpec` with the daemon's
    choices filled in, ``target`` the ``"module:function"`` to call.
    """
    return {'id': task_id, 'spec': spec.to_wire(), 'target': target,
            'log_path': log_path}


def rlimit(name):
    """The ``resource.RLIMIT_*`` constant for ``name`` (e.g. ``"as"``)."""
    value = getattr(resource, 'RLIMIT_' + name.upper(), None)
    if value is None:
        raise ValueError('unknown resource limit %r' % name)
    return value


def parse_limits(limits):
    """Configured ``{name: "value"}`` -> ``{name: int}``; or ValueError."""
    parsed = {}
    for name, value in (limits or {}).items():
        rlimit(name)
        try:
            parsed[name] = int(value)
        except ValueError:
            raise ValueError('resource limit %s: %r is not an integer'
                             % (name, value))
        if parsed[name] < 0:
            raise ValueError('resource limit %s: %d is negative'
                             % (name, parsed[name]))
    return parsed


def apply_limits(limits):
    """Set each limit as soft and hard limit: a task cannot raise it."""
    for name, value in (limits or {}).items():
        resource.setrlimit(rlimit(name), (value, value))


@dataclasses.dataclass(frozen=True)
class TaskUser:
    """The unprivileged user tasks run as."""

    name: str
    uid: int
    gid: int
    groups: tuple
    home: str

    @classmethod
    def lookup(cls, name):
        """The user called ``name``; KeyError if there is none."""
        entry = pwd.getpwnam(name)
        return cls(name, entry.pw_uid, entry.pw_gid,
                   tuple(os.getgrouplist(name, entry.pw_gid)),
                   entry.pw_dir)

    def become(self):
        """Drop this process to the user's uid and gids, for good."""
        os.setgroups(list(self.groups))
        os.setgid(self.gid)
        os.setuid(self.uid)
        if os.getuid() != self.uid or os.geteuid() != self.uid:
            raise OSError('could not drop to user %s' % self.name)
        os.environ.update(HOME=self.home, USER=self.name,
                          LOGNAME=self.name)


def _own_session(limits, user):
    """Own session, adopt orphans, set limits, become the task user."""
    os.setsid()
    processes.become_subreaper()
    apply_limits(limits)
    if user is not None:
        user.become()


def after_fork(keep):
    """Leave the daemon's state behind in a freshly forked child.

    Unblocks and resets the signals the daemon handles and closes every
    socket, pipe and pidfd it inherited except the fds in ``keep``, so that
    a child never holds a client connection, a listener, another task's
    pipe or a handle on another task's process. Replaces ``sys.stdout``
    and ``sys.stderr`` (see :func:`_fresh_std_streams`).
    """
    _fresh_std_streams()
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    for name in os.listdir('/proc/self/fd'):
        fd = int(name)
        if fd < 3 or fd in keep:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode) or _is_pidfd(fd):
            os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def _is_pidfd(fd):
    try:
        return os.readlink('/proc/self/fd/%d' % fd) == 'anon_inode:[pidfd]'
    except OSError:
        return False


def _fresh_std_streams():
    """Give the child stdout and stderr objects no other thread ever held.

    The daemon forks from one of its threads; another may have been writing
    a log line at that instant, and its lock on the stream's buffer stays
    locked for ever in the child. Flushing or writing through the inherited
    objects would then hang, so the child opens new ones on fds 1 and 2,
    drops what the old buffers held (the daemon writes its own copy) and
    points logging's stream handlers at the new ones.
    """
    replaced = {}
    for name, fd in (('stdout', 1), ('stderr', 2)):
        old = getattr(sys, name)
        new = open(fd, 'w', buffering=1, closefd=False,
                   encoding=getattr(old, 'encoding', None) or 'utf-8',
                   errors='backslashreplace')
        setattr(sys, name, new)
        replaced[id(old)] = new
        replaced[id(getattr(sys, '__%s__' % name))] = new
    loggers = [logging.root] + [
        lg for lg in logging.root.manager.loggerDict.values()
        if isinstance(lg, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            stream = getattr(handler, 'stream', None)
            if stream is not None and id(stream) in replaced:
                # Not setStream(): it would flush the old stream.
                handler.stream = replaced[id(stream)]


def sender(fd):
    """A function writing one event dict as a JSON line to ``fd``."""
    def send(message):
        data = memoryview(protocol.encode(message))
        while data:
            data = data[os.write(fd, data):]
    return send


@contextlib.contextmanager
def _log_to(path):
    sys.stdout.flush()
    sys.stderr.flush()
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [log_fd]:
            os.close(fd)


@contextlib.contextmanager
def _environment(env, threads):
    saved = dict(os.environ)
    try:
        os.environ.update(env or {})
        os.environ.update((name, str(threads)) for name in THREAD_ENV)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _threads(threads):
    torch = sys.modules.get('torch')
    saved = torch.get_num_threads() if torch else None
    if torch:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch:
            torch.set_num_threads(saved)


@contextlib.contextmanager
def _cwd(path):
    saved = os.getcwd()
    if path:
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(saved)


def seed_all(seed):
    """Seed Python's, numpy's (if loaded) and torch's (if loaded) RNGs.

    A forked child inherits the daemon's RNG states, so without this every
    task would draw the same numbers.
    """
    random.seed(seed)
    numpy = sys.modules.get('numpy')
    if numpy is not None:
        numpy.random.seed(seed % 2 ** 32)
    torch = sys.modules.get('torch')
    if torch is not None:
        torch.manual_seed(seed)


def _describe(exc):
    text = ''.join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[:_MAX_ERROR_CHARS]


def run_task(job, send):
    """Run the task ``job`` (see :func:`job`); report via ``send``.

    Returns True when the task returned a result. The full traceback of a
    failure goes to the task's log; the event carries its last line.
    """
    spec = protocol.TaskSpec.from_wire(job['spec'])
    tasks.bind_reporter(lambda event: send(dict(event, task=job['id'])))
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_log_to(job['log_path']))
            try:
                stack.enter_context(_environment(spec.env, spec.threads))
                stack.enter_context(_threads(spec.threads))
                stack.enter_context(_cwd(spec.cwd))
                seed_all(spec.seed)
                result = resolve(job['target'])(dict(spec.args))
                json.dumps(result)
                message = {'event': 'result', 'result': result}
            except BaseException as exc:
                traceback.print_exc()
                message = {'event': 'error', 'error': _describe(exc)}
    except BaseException as exc:
        message = {'event': 'error', 'error': _describe(exc)}
    finally:
        tasks.bind_reporter(None)
    message['leftovers_killed'] = processes.end_leftovers()
    send(dict(message, task=job['id']))
    return message['event'] == 'result'


def child_main(job, channel, user=None):
    """Body of a forked task child; never returns.

    ``user`` is the :class:`TaskUser` to run as, or None.
    """
    code = 1
    try:
        after_fork({channel})
        _own_session(job['spec'].get('limits'), user)
        code = 0 if run_task(job, sender(channel)) else 1
    finally:
        os._exit(code)


def worker_main(commands, channel, max_bytes, limits, user=None):
    """Body of a persistent worker: run the jobs read from ``commands``.

    The operator's ``limits`` hold for the worker's whole life. Returns
    never; the worker exits when the daemon closes the command pipe.
    """
    try:
        after_fork({commands, channel})
        _own_session(limits, user)
        send = sender(channel)
        read = functools.partial(os.read, commands)
        for line in protocol.iter_lines(read, max_bytes):
            run_task(json.loads(line), send)
    finally:
        os._exit(0)
