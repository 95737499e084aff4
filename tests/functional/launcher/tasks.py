"""Small tasks the functional tests submit to the guests' task daemons."""

import os

from mlaccel import tasks


def echo(args):
    """Report a first step, then return the arguments and the process id."""
    tasks.report_first_step()
    return {'args': args, 'pid': os.getpid()}


def fail(args):
    """A task whose training loop crashes."""
    tasks.report_first_step()
    raise RuntimeError('injected task failure')
