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


def warm_fail():
    raise ImportError('warm-up hook broken on purpose')
