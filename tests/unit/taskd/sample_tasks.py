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

"""Tiny task functions run by the daemon in the tests (no torch)."""

import os
import random
import signal
import sys
import time

from mlaccel import tasks


def echo(args):
    """Return the args, the seed-driven draw and the process context."""
    tasks.report_first_step()
    print('echo says %s' % args.get('say', ''))
    return {'args': args, 'draw': random.random(), 'pid': os.getpid(),
            'cwd': os.getcwd(), 'env': os.environ.get('SAMPLE_ENV'),
            'omp': os.environ.get('OMP_NUM_THREADS')}


def sleep(args):
    tasks.report_first_step()
    time.sleep(args.get('seconds', 1.0))
    return {'slept': args.get('seconds', 1.0)}


def fail(args):
    print('about to fail', file=sys.stderr)
    raise RuntimeError('task failed on purpose')


def exit_code(args):
    sys.stdout.flush()
    os._exit(args.get('code', 3))


def segfault(args):
    import ctypes
    ctypes.string_at(0)


def kill_self(args):
    os.kill(os.getpid(), signal.SIGKILL)


def not_json(args):
    return {'value': object()}


def limits(args):
    import resource
    return {'nofile': resource.getrlimit(resource.RLIMIT_NOFILE)[0]}


def ignore_term(args):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tasks.report_first_step()
    time.sleep(args.get('seconds', 60))
    return {}


def big_result(args):
    return {'blob': 'x' * args['size']}


def touch_after(args):
    """Sleep, then create the file ``args['path']``."""
    tasks.report_first_step()
    time.sleep(args.get('seconds', 1.0))
    with open(args['path'], 'w') as marker:
        marker.write('done')
    return {'path': args['path']}


def touch_when_released(args):
    """Wait for the file ``args['release']``, then create ``args['path']``."""
    tasks.report_first_step()
    deadline = time.monotonic() + 60
    while not os.path.exists(args['release']) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(args['path'], 'w') as marker:
        marker.write('done')
    return {'path': args['path']}


def warm_fail():
    raise ImportError('warm-up hook broken on purpose')


def proc_state(pid):
    """``(state, ppid)`` of ``pid`` from /proc, or None once it is gone."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as stat:
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rindex(b')') + 2:].split()
    return fields[0].decode(), int(fields[1])


def leave_child(args):
    """Fork a child that outlives the task, holding its pipes; its pid."""
    pid = os.fork()
    if pid == 0:
        time.sleep(args.get('seconds', 600))
        os._exit(0)
    tasks.report_first_step()
    return {'child': pid}


def leave_detached(args):
    """Leave a grandchild in a session of its own (a double fork)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(args.get('seconds', 600))
            os._exit(0)
        os.write(write_fd, str(grandchild).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return {'child': int(os.read(read_fd, 64))}


def leave_zombie(args):
    """Fork a child that exits at once; return without reaping it."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    deadline = time.monotonic() + 30
    while (proc_state(pid) or ('Z',))[0] != 'Z':
        if time.monotonic() > deadline:
            raise RuntimeError('the child did not exit')
        time.sleep(0.01)
    return {'child': pid}


def raise_limit(args):
    """Try to raise RLIMIT_NOFILE to ``args['to']``; report the limits."""
    import resource
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args['to'], args['to']))
        raised = True
    except (ValueError, OSError):
        raised = False
    return {'before': list(before), 'raised': raised,
            'after': list(resource.getrlimit(resource.RLIMIT_NOFILE))}


def identity(args):
    """The user the task runs as."""
    print('written as uid %d' % os.getuid())
    return {'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(),
            'groups': sorted(os.getgroups()), 'home': os.environ.get('HOME')}


def handles(args):
    """What the task inherited besides its standard streams."""
    kinds = []
    for name in os.listdir('/proc/self/fd'):
        try:
            kinds.append(os.readlink('/proc/self/fd/' + name))
        except OSError:
            pass
    return {'pidfds': kinds.count('anon_inode:[pidfd]'),
            'sockets': sum(kind.startswith('socket:') for kind in kinds)}


def reach_daemon(args):
    """What a task may do to its daemon: each attempt and how it ended.

    It signals the daemon, connects to its socket, reads its token and
    plants a ``.pth`` file in the given directories, in the code's and in
    every directory on ``sys.path`` (removing what it managed to plant).
    """
    import socket

    def attempt(action):
        try:
            action()
            return 'done'
        except OSError as exc:
            return type(exc).__name__

    def plant(directory):
        def write():
            path = os.path.join(directory, 'planted-by-a-task.pth')
            with open(path, 'x') as stream:
                stream.write('import os\n')
            os.unlink(path)
        return write

    def connect():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(args['socket'])

    code = os.path.dirname(os.path.dirname(tasks.__file__))
    tried = {'signal': attempt(lambda: os.kill(args['daemon_pid'], 0)),
             'socket': attempt(connect),
             'token': attempt(lambda: open(args['token_file']).close()),
             'code': attempt(plant(code))}
    for directory in args['directories']:
        tried[directory] = attempt(plant(directory))
    tried['sys.path'] = sorted({attempt(plant(entry)) for entry in sys.path
                                if entry and os.path.isdir(entry)})
    return tried


_LEFT = []


def leave_thread(args):
    """Leave a thread behind in this process; count those left before."""
    import threading
    _LEFT.append(threading.Thread(target=threading.Event().wait,
                                  daemon=True))
    _LEFT[-1].start()
    return {'pid': os.getpid(), 'threads_left': len(_LEFT) - 1}
