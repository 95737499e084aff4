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

"""The daemon's processes: forking, reaping, and what a task leaves behind.

The daemon is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): a
process a task started and abandoned is re-parented to the daemon, not to
init, so one :class:`Reaper` thread reaps every child of the daemon, its own
task processes and persistent workers as well as such orphans. Each task
process or worker runs in a session of its own (``setsid``), and what is
still in that session when the task process ends is killed, while the
process is still a zombie, so that its pid (the session's id) cannot have
been reused (:func:`kill_session`), and so is any orphan the daemon adopted
meanwhile: a task process adopts its own orphans while it runs, so an
orphan of the daemon belongs to a task that has ended.
Processes are signalled through pidfds, so a recycled pid is never hit.
"""

import ctypes
import os
import signal
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Adopt the orphans of this process's descendants."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, 'prctl(PR_SET_CHILD_SUBREAPER): %s'
                      % os.strerror(err))


def _stat(pid):
    """``(state, ppid, session)`` of ``pid``, or None if it is gone."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as stat_file:
            data = stat_file.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything.
    fields = data[data.rindex(b')') + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[3])


def _targets(pid, sid, parent):
    """True if ``pid`` lives in session ``sid`` or is ``parent``'s child."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in 'ZX' and (
        stat[2] == sid or stat[1] == parent)


def _pids():
    for name in os.listdir('/proc'):
        if name.isdigit():
            yield int(name)


def kill_session(sid, parent=None, exclude=(), rounds=20):
    """SIGKILL the processes of session ``sid``; return how many.

    Also kills every child of ``parent`` if given; spares the pids in
    ``exclude``. Repeats until none is left (a process may fork while it
    is being killed), at most ``rounds`` times. A process is checked
    again through its pidfd before it is signalled.
    """
    killed = set()
    for _ in range(rounds):
        found = False
        for pid in _pids():
            if pid in exclude or pid in killed:
                continue
            if not _targets(pid, sid, parent):
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if _targets(pid, sid, parent):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    killed.add(pid)
                    found = True
            except ProcessLookupError:
                pass
            finally:
                os.close(pidfd)
        if not found:
            break
    return len(killed)


def reap_children():
    """Reap every exited child of this process without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_leftovers(deadline=5.0):
    """Kill and reap what the task left behind; return how many.

    That is what is left in this process's session and among its
    children. Run by a task process or worker (a subreaper in a session
    of its own) when its task returns.
    """
    me = os.getpid()
    killed = kill_session(os.getsid(0), parent=me, exclude=(me,))
    end = time.monotonic() + deadline
    while True:
        reap_children()
        alive = [pid for pid in _pids()
                 if (_stat(pid) or (None, None))[1] == me]
        if not alive or time.monotonic() > end:
            return killed
        time.sleep(0.005)


class Child:
    """A forked process, signalled by pidfd; its exit is set by the reaper.

    The pidfd stays open until :meth:`close`, so that signalling an exited
    process fails instead of hitting another one.
    """

    def __init__(self, pid):
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self._lock = threading.Lock()
        self.exit_code = None
        self.leftovers_killed = 0
        self.reaped = threading.Event()

    def signal(self, signum):
        """Send ``signum`` unless the process has exited; True if sent."""
        with self._lock:
            if self.pidfd is None or self.reaped.is_set():
                return False
            try:
                signal.pidfd_send_signal(self.pidfd, signum)
                return True
            except ProcessLookupError:
                return False

    def wait(self, timeout=None):
        """The exit code once reaped (negative: signal), else None."""
        self.reaped.wait(timeout)
        return self.exit_code

    def close(self):
        with self._lock:
            if self.pidfd is not None:
                os.close(self.pidfd)
                self.pidfd = None

    def _exited(self, status):
        self.exit_code = os.waitstatus_to_exitcode(status)
        self.reaped.set()


class Reaper:
    """Forks children and reaps every child of the process, one thread."""

    def __init__(self):
        self._cond = threading.Condition()
        self._children = {}
        self._forks = 0
        self._thread = None

    def fork(self, body):
        """Fork; the child runs ``body()``, which must never return.

        Returns the :class:`Child`. The child is registered before the
        reaper can see its exit.
        """
        with self._cond:
            pid = os.fork()
            if pid == 0:
                try:
                    body()
                finally:
                    os._exit(1)
            child = self._children[pid] = Child(pid)
            self._forks += 1
            self._cond.notify_all()
        return child

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='reaper')
        self._thread.start()

    def _run(self):
        while True:
            forks = self._forks
            try:
                # WNOWAIT: the exited child stays a zombie, so its pid,
                # which names its session, cannot be reused while what it
                # left in that session is killed.
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                with self._cond:
                    # No child: sleep until the next fork (unless one came
                    # meanwhile). A registered child that other code waited
                    # for: retry in a while.
                    if self._forks == forks:
                        self._cond.wait(1.0 if self._children else None)
                continue
            if info is None:
                continue
            pid = info.si_pid
            with self._cond:
                child = self._children.pop(pid, None)
                if child is not None:
                    # An unregistered child is an orphan of an ended task
                    # (a running task adopts its own orphans): killed too.
                    # Forks wait meanwhile, so none is taken for one.
                    try:
                        child.leftovers_killed = kill_session(
                            pid, parent=os.getpid(),
                            exclude=set(self._children) | {pid})
                    except Exception:
                        LOG.exception('Could not kill what process %d left '
                                      'behind', pid)
            _, status = os.waitpid(pid, 0)
            if child is not None:
                child._exited(status)
            else:
                LOG.info('Reaped process %d, left behind by a task, exit '
                         'code %d', pid, os.waitstatus_to_exitcode(status))
