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

"""Small tasks the functional tests submit to the guests' task daemons."""

import os
import time

from mlaccel import tasks


def echo(args):
    """Report a first step, then return the arguments and the process id."""
    tasks.report_first_step()
    return {'args': args, 'pid': os.getpid()}


def fail(args):
    """A task whose training loop crashes."""
    tasks.report_first_step()
    raise RuntimeError('injected task failure')


def wait_for_file(args):
    """Report a first step, then run until ``args['path']`` exists."""
    tasks.report_first_step()
    deadline = time.monotonic() + args.get('timeout', 60.0)
    while not os.path.exists(args['path']):
        if time.monotonic() > deadline:
            raise RuntimeError('%s never appeared' % args['path'])
        time.sleep(0.05)
    return {'path': args['path']}
