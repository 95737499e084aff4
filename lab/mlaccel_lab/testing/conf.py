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

"""Options of the test virt driver (``mlaccel_lab.testing.virt``).

The test driver is for test clouds only; these options have no effect
anywhere else.
"""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_test_driver',
    title='mlaccel test virt driver',
    help='Options of mlaccel_lab.testing.virt, the Nova test driver of the '
         'all-in-one test cloud. Never used in production.')

OPTS = [
    cfg.ListOpt(
        'guest_commands',
        default=['mlaccel-taskd', 'python -m mlaccel.',
                 'python -m mlaccel_lab.testing.'],
        help='Command lines a guest may be started with, matched word by '
             'word: the command\'s name exactly, then each word exactly, '
             'except that a last word ending in "." matches a dotted module '
             'name in that package. The driver starts the first entry of a '
             'server\'s cloud-config "runcmd" (or the first command of a '
             '"#!" user-data script) that matches one of these, always with '
             'the compute\'s own program: "python" is the interpreter the '
             'compute service runs on, other commands must be installed '
             'beside it. Anything else is not started.'),
    cfg.FloatOpt(
        'guest_stop_timeout',
        default=10.0,
        min=0.0,
        help='Seconds a guest gets to exit after SIGTERM when its server is '
             'deleted or stopped, before it is killed.'),
]
