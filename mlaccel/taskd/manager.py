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

"""The daemon's tasks: their records, forked children, persistent workers.

Every task has a thread of its own that waits for a free slot (a fork slot
or an idle worker), starts the task and reads its events from a pipe until
its process ends (not until the pipe closes: a process the task started
may hold the pipe open). Processes are forked and reaped by a
:class:`processes.Reaper`; what a task leaves behind is killed with it and
counted in the task's ``leftovers_killed``.
"""

import collections
import dataclasses
import fcntl
import functools
import json
import os
import resource
import select
import signal
import threading
import time
import uuid

from oslo_log import log as logging

from mlaccel.taskd import processes
from mlaccel.taskd import protocol
from mlaccel.taskd import runner

LOG = logging.getLogger(__name__)

QUEUED = 'queued'
RUNNING = 'running'
SUCCEEDED = 'succeeded'
FAILED = 'failed'
CANCELLED = 'cancelled'
FINAL = (SUCCEEDED, FAILED, CANCELLED)

_MAX_LOG_REPLY = 1024 * 1024


class Worker:
    """A persistent worker process and its two pipes.

    ``holder`` is the daemon's holder generation the worker serves (see
    :meth:`TaskManager.renew_workers`).
    """

    def __init__(self, child, commands, events, holder=0):
        self.child = child
        self.commands = commands
        self.events = events
        self.holder = holder

    @property
    def alive(self):
        return not self.child.reaped.is_set()

    def close(self):
        os.close(self.commands)
        os.close(self.events)
        self.child.close()


class Task:
    """One submitted task and what is known about it."""

    def __init__(self, job, mode):
        self.id = job['id']
        self.job = job
        self.spec = protocol.TaskSpec.from_wire(job['spec'])
        self.mode = mode
        self.state = QUEUED
        self.submitted_at = time.time()
        self.started_at = self.first_step_at = self.finished_at = None
        self.result = self.error = self.exit_code = None
        self.has_result = False
        self.leftovers_killed = 0
        self.cancel_requested = False
        self.process = None
        self.done = threading.Event()

    def status(self):
        return {'id': self.id, 'entry': self.spec.entry,
                'mode': self.mode, 'seed': self.spec.seed,
                'threads': self.spec.threads,
                'pid': self.process.pid if self.process else None,
                'state': self.state, 'submitted_at': self.submitted_at,
                'started_at': self.started_at,
                'first_step_at': self.first_step_at,
                'finished_at': self.finished_at, 'result': self.result,
                'error': self.error, 'exit_code': self.exit_code,
                'leftovers_killed': self.leftovers_killed}


def _exit_reason(code):
    if code < 0:
        return 'task killed by signal %s' % signal.Signals(-code).name
    return 'task exited with code %d without a result' % code


class TaskManager:
    """Starts, tracks, cancels and drains the daemon's tasks."""

    def __init__(self, group, catalog, user=None):
        """Tasks run only if ``catalog`` allows them, as ``user``.

        ``catalog`` is a :class:`catalog.Catalog`, ``user`` the
        :class:`runner.TaskUser` tasks run as, or None.
        """
        self.conf = group
        self.catalog = catalog
        self.user = user
        self.limits = runner.parse_limits(group.task_limits)
        self.draining = False
        self._cond = threading.Condition()
        self._tasks = collections.OrderedDict()
        self._forks = 0
        self._workers = set()
        self._idle = []
        # Workers killed for a new holder, still to be reaped and closed.
        self._retired = set()
        self._holder = 0
        self._threads = group.task_threads or len(os.sched_getaffinity(0))
        self._reaper = processes.Reaper()

    # -- requests ---------------------------------------------------------

    def submit(self, spec, request_id=None):
        """Accept a :class:`protocol.TaskSpec`; return the new :class:`Task`.

        Raises :class:`protocol.ProtocolError` for a spec that cannot be
        run here (entry, mode, limits) or while draining.
        """
        rid = request_id
        try:
            target = self.catalog.target(spec.entry)
        except LookupError as exc:
            raise protocol.ProtocolError(protocol.INVALID, str(exc), rid)
        except PermissionError as exc:
            raise protocol.ProtocolError(protocol.FORBIDDEN, str(exc), rid)
        if spec.mode == 'worker':
            if not self.conf.workers:
                raise protocol.ProtocolError(
                    protocol.INVALID, 'mode "worker" is disabled: the daemon '
                    'runs no persistent workers', rid)
            if spec.limits:
                raise protocol.ProtocolError(
                    protocol.INVALID, 'resource limits need mode "fork"; a '
                    'worker outlives its tasks', rid)
            limits = self.limits
        else:
            limits = self._limits(spec.limits or {}, rid)
        task_id = uuid.uuid4().hex
        spec = dataclasses.replace(
            spec, threads=spec.threads or self._threads,
            seed=(spec.seed if spec.seed is not None
                  else int.from_bytes(os.urandom(4), 'big')),
            limits=limits)
        log_path = os.path.join(self.conf.log_dir, task_id + '.log')
        task = Task(runner.job(task_id, spec, target, log_path), spec.mode)
        with self._cond:
            if self.draining:
                raise protocol.ProtocolError(
                    protocol.DRAINING, 'the daemon is shutting down and '
                    'accepts no task', rid)
            self._tasks[task_id] = task
            self._forget_finished()
        threading.Thread(target=self._run, args=(task,), daemon=True,
                         name='task-%s' % task_id[:8]).start()
        LOG.info('Task %s submitted: %s (%s)', task_id, spec.entry,
                 spec.mode)
        return task

    def _limits(self, requested, rid):
        """The operator's limits, lowered where ``requested`` says so.

        A request may not raise a limit: not above the configured
        task_limits, nor above the daemon's own hard limit.
        """
        limits = dict(self.limits)
        for name, value in requested.items():
            try:
                res = runner.rlimit(name)
            except ValueError as exc:
                raise protocol.ProtocolError(protocol.INVALID, str(exc), rid)
            ceiling = self.limits.get(name)
            if ceiling is None:
                ceiling = resource.getrlimit(res)[1]
            if ceiling != resource.RLIM_INFINITY and value > ceiling:
                raise protocol.ProtocolError(
                    protocol.INVALID, 'limits.%s: %d is above the daemon\'s '
                    'limit %d; a request may only lower limits'
                    % (name, value, ceiling), rid)
            limits[name] = value
        return limits

    def get(self, task_id, request_id=None):
        with self._cond:
            task = self._tasks.get(task_id)
        if task is None:
            raise protocol.ProtocolError(
                protocol.NOT_FOUND, 'no task %s' % task_id, request_id)
        return task

    def cancel(self, task):
        """Stop ``task``: dequeue it, or SIGTERM then SIGKILL its process."""
        with self._cond:
            if task.done.is_set():
                return
            task.cancel_requested = True
            self._cond.notify_all()
            process = task.process
        if process is not None:
            self._stop(process)

    def _stop(self, process):
        process.signal(signal.SIGTERM)
        timer = threading.Timer(self.conf.cancel_timeout, process.signal,
                                (signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def logs(self, task, tail=None):
        """The end of ``task``'s log: ``(text, truncated)``."""
        try:
            with open(task.job['log_path'], 'rb') as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - _MAX_LOG_REPLY))
                data = log.read()
        except FileNotFoundError:
            return '', False
        truncated = size > len(data)
        lines = data.decode('utf-8', 'replace').splitlines(keepends=True)
        if tail is not None and len(lines) > tail:
            lines, truncated = lines[len(lines) - tail:], True
        return ''.join(lines), truncated

    def counts(self):
        with self._cond:
            counts = collections.Counter(t.state for t in
                                         self._tasks.values())
            return {'tasks': dict(counts), 'workers': len(self._workers),
                    'idle_workers': len(self._idle)}

    def _forget_finished(self):
        finished = [t for t in self._tasks.values() if t.done.is_set()]
        for task in finished[:max(0, len(finished) -
                                  self.conf.max_finished_tasks)]:
            del self._tasks[task.id]

    # -- running ----------------------------------------------------------

    def _has_slot(self, mode):
        if mode == 'worker':
            return bool(self._idle)
        return self._forks < self.conf.max_tasks

    def _run(self, task):
        worker = None
        with self._cond:
            while not (task.cancel_requested or self.draining or
                       self._has_slot(task.mode)):
                self._cond.wait()
            if task.cancel_requested or self.draining:
                self._finish(task, CANCELLED, 'cancelled before it started')
                return
            if task.mode == 'worker':
                worker = self._idle.pop()
            else:
                self._forks += 1
            task.state = RUNNING
            task.started_at = time.time()
        try:
            if worker is None:
                self._run_forked(task)
            else:
                self._run_in_worker(task, worker)
        except Exception as exc:
            LOG.exception('Task %s could not be run', task.id)
            with self._cond:
                self._finish(task, FAILED, 'taskd could not run the task: %s'
                             % exc)
        finally:
            with self._cond:
                if worker is None:
                    self._forks -= 1
                elif not worker.alive:
                    worker.close()
                elif worker.holder == self._holder:
                    self._idle.append(worker)
                else:
                    self._retire(worker)
                self._cond.notify_all()

    def _attach(self, task, process):
        with self._cond:
            task.process = process
            cancelled = task.cancel_requested
        if cancelled:
            self._stop(process)

    def _run_forked(self, task):
        self._create_log(task.job['log_path'])
        read_fd, write_fd = os.pipe()
        try:
            child = self._reaper.fork(functools.partial(
                runner.child_main, task.job, write_fd, self.user))
        finally:
            os.close(write_fd)
        self._attach(task, child)
        try:
            self._read_events(task, read_fd, child, until_final=False)
        finally:
            os.close(read_fd)
        code = child.wait()
        child.close()
        with self._cond:
            task.leftovers_killed += child.leftovers_killed
        if task.leftovers_killed:
            LOG.warning('Task %s left %d process(es) behind; killed them',
                        task.id, task.leftovers_killed)
        self._settle(task, code)

    def _run_in_worker(self, task, worker):
        self._create_log(task.job['log_path'])
        self._attach(task, worker.child)
        try:
            runner.sender(worker.commands)(task.job)
        except OSError:
            pass   # the worker died; its exit ends the reading below
        if self._read_events(task, worker.events, worker.child,
                             until_final=True):
            self._settle(task, 0 if task.has_result else 1)
        else:
            with self._cond:
                task.leftovers_killed += worker.child.leftovers_killed
            self._settle(task, worker.child.wait())

    def _create_log(self, path):
        """Create a task's log file, owned by the task's user."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        try:
            if self.user is not None:
                os.fchown(fd, self.user.uid, self.user.gid)
        finally:
            os.close(fd)

    def _read_events(self, task, fd, child, until_final):
        """Apply the events on ``fd``; True once a final one was read.

        Reads until a final event (``until_final``), the end of the pipe,
        or the end of ``child``: then what is already in the pipe is read,
        and no more.
        """
        for line in protocol.iter_lines(_reader(fd, child),
                                        self.conf.max_result_bytes):
            if line is protocol.TOO_LONG:
                event = {'event': 'error', 'error': 'task result larger than '
                         '%d bytes' % self.conf.max_result_bytes}
            else:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(event, dict):
                    continue
            with self._cond:
                if event.get('event') == 'first_step':
                    task.first_step_at = event.get('at')
                elif event.get('event') == 'result':
                    task.result, task.has_result = event.get('result'), True
                elif event.get('event') == 'error':
                    task.error, task.has_result = event.get('error'), False
                if event.get('event') in ('result', 'error'):
                    task.leftovers_killed += int(
                        event.get('leftovers_killed') or 0)
            if until_final and event.get('event') in ('result', 'error'):
                return True
        return False

    def _settle(self, task, exit_code):
        with self._cond:
            task.exit_code = exit_code
            if task.has_result and exit_code == 0:
                self._finish(task, SUCCEEDED)
            elif task.cancel_requested:
                self._finish(task, CANCELLED, 'cancelled')
            else:
                self._finish(task, FAILED, task.error or
                             _exit_reason(exit_code))

    def _finish(self, task, state, error=None):
        """Record the end of ``task``; the caller holds ``_cond``."""
        task.state = state
        task.finished_at = time.time()
        if state != SUCCEEDED:
            task.error = task.error or error
        task.done.set()
        LOG.info('Task %s %s%s', task.id, state,
                 ': %s' % task.error if task.error else '')

    # -- workers ----------------------------------------------------------

    def start(self):
        """Adopt orphans, fork the workers, start reaping.

        Call while the daemon still has a single thread: the workers are
        forked first.
        """
        processes.become_subreaper()
        for _ in range(self.conf.workers):
            self._spawn_worker()
        self._reaper.start()

    def _spawn_worker(self):
        command_r, command_w = os.pipe()
        event_r, event_w = os.pipe()
        try:
            child = self._reaper.fork(functools.partial(
                runner.worker_main, command_r, event_w,
                self.conf.max_request_bytes * 64, self.limits, self.user))
        finally:
            os.close(command_r)
            os.close(event_w)
        with self._cond:
            worker = Worker(child, command_w, event_r, self._holder)
            self._workers.add(worker)
            self._idle.append(worker)
            self._cond.notify_all()
        threading.Thread(target=self._watch_worker, args=(worker,),
                         daemon=True, name='worker-%d' % child.pid).start()
        LOG.info('Persistent worker %d started', child.pid)

    def _watch_worker(self, worker):
        code = worker.child.wait()
        with self._cond:
            self._workers.discard(worker)
            if worker in self._idle:
                self._idle.remove(worker)
                worker.close()
            elif worker in self._retired:
                self._retired.discard(worker)
                worker.close()
            respawn = not self.draining
        LOG.info('Persistent worker %d exited with code %s%s',
                 worker.child.pid, code, '; replacing it' if respawn else '')
        if respawn:
            self._spawn_worker()

    def renew_workers(self):
        """The daemon has a new holder: no worker of the last one serves it.

        A task run in a persistent worker may leave state behind in it
        (a thread, a patched module) that would see the next tasks there.
        Idle workers are killed at once and busy ones when their task
        ends; each is replaced by a fresh fork of the daemon, which no task
        can change. A worker-mode task waits for a fresh worker meanwhile.
        """
        with self._cond:
            self._holder += 1
            idle, self._idle = self._idle, []
            for worker in idle:
                self._retire(worker)
        if idle:
            LOG.info('New holder: replacing %d persistent worker(s)',
                     len(idle))

    def _retire(self, worker):
        """Kill ``worker``; its watcher closes and replaces it."""
        self._retired.add(worker)
        worker.child.signal(signal.SIGKILL)

    # -- shutdown ---------------------------------------------------------

    def drain(self, grace):
        """Stop accepting tasks and end the running ones.

        Queued tasks are cancelled, running ones get ``grace`` seconds to
        finish and are killed after that; then the workers are stopped.
        """
        with self._cond:
            self.draining = True
            self._cond.notify_all()
            pending = [t for t in self._tasks.values()
                       if not t.done.is_set()]
        LOG.info('Draining: %d task(s) pending, grace %.1f s',
                 len(pending), grace)
        deadline = time.monotonic() + grace
        for task in pending:
            task.done.wait(max(0.0, deadline - time.monotonic()))
        for task in pending:
            with self._cond:
                if task.done.is_set() or task.process is None:
                    continue
                task.cancel_requested = True
                task.error = 'killed: the shutdown grace period ended'
            LOG.warning('Killing task %s after the grace period', task.id)
            task.process.signal(signal.SIGKILL)
        for task in pending:
            task.done.wait(10)
        with self._cond:
            workers = list(self._workers)
        for worker in workers:
            worker.child.signal(signal.SIGKILL)
            worker.child.reaped.wait(10)


def _reader(fd, child):
    """``read(n)`` on pipe ``fd`` that ends when ``child`` has ended.

    Once the child has exited (its pidfd is readable) and been reaped,
    what the pipe holds is read: at most its capacity, for a process the
    task left behind and that escaped being killed may still write.
    """
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(child.pidfd, select.POLLIN)
    left = [None]

    def read(size):
        while left[0] is None:
            ready = dict(poller.poll())
            if child.pidfd in ready:
                child.wait()
                left[0] = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
            elif fd in ready:
                try:
                    return os.read(fd, size)
                except BlockingIOError:
                    continue
        if left[0] <= 0:
            return b''
        try:
            data = os.read(fd, min(size, left[0]))
        except BlockingIOError:
            return b''
        left[0] -= len(data)
        return data
    return read
