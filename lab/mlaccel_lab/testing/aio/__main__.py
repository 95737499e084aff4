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

"""Command line of the all-in-one cloud.

::

    python -m mlaccel_lab.testing.aio up [--base DIR] [--computes N]
                                     [--no-cinder] [--no-mlaccel]
    python -m mlaccel_lab.testing.aio status [--base DIR]
    python -m mlaccel_lab.testing.aio tempest [--base DIR] [--regex R]
                                          [--exclude-regex R]
                                          [--concurrency N]
    python -m mlaccel_lab.testing.aio down [--base DIR] [--purge]
    python -m mlaccel_lab.testing.aio ci [--base DIR] [--functional-tests DIR]
    python -m mlaccel_lab.testing.aio demo [--base DIR] [--count N] [--steps N]

``ci`` is the CI job: up, mlaccel's tempest tests, an upstream tempest
compute subset and the functional tests that need the cloud, then down and
a check that no process is left. ``demo`` is the main job: the example task
launched with and without mlaccel, life-cycle records side by side.

``--base`` defaults to ``$MLACCEL_AIO_BASE`` or ``./.aio``. ``up`` stops
what it started if it fails half-way.
"""

import argparse
import json
import os
import subprocess
import sys

from mlaccel_lab.testing.aio import ci
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import demo
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import procs
from mlaccel_lab.testing.aio import tempest_conf


def _parser():
    parser = argparse.ArgumentParser(prog='python -m mlaccel_lab.testing.aio')
    parser.add_argument('--base', default=os.environ.get(
        aio_layout.BASE_ENV, '.aio'), help='state directory of the cloud')
    sub = parser.add_subparsers(dest='command', required=True)
    up = sub.add_parser('up', help='bring the cloud up')
    job = sub.add_parser('ci', help='up, every suite, down; one summary')
    for command in (up, job):
        command.add_argument('--computes', type=int, default=2,
                             help='number of nova-compute services')
        command.add_argument('--no-cinder', action='store_true',
                             help='leave cinder out')
        command.add_argument('--plain-volumes', action='store_true',
                             help='every volume clone copies the data (by '
                                  'default volumes are on a loop-mounted '
                                  'XFS with reflink, where one can be had)')
    up.add_argument('--no-mlaccel', action='store_true',
                    help='stock scheduler: do not run mlaccel-config')
    up.add_argument('--controllers', type=int, default=1,
                    help='controllers: 1 (a Redis state bus) or more, each '
                         'with a nova-scheduler, a cinder-scheduler and a '
                         'pool manager on its own member of a three-member '
                         'etcd cluster')
    job.add_argument('--functional-tests', metavar='DIR',
                     help='also run the aio and devstack functional tests '
                          'found in DIR (e.g. ./tests/functional)')
    job.add_argument('--no-upstream', action='store_true',
                     help='skip the upstream tempest subset')
    demo = sub.add_parser('demo', help='up, the example task with and '
                          'without mlaccel side by side, down')
    demo.add_argument('--count', type=int, default=2, help='VMs per launch')
    demo.add_argument('--steps', type=int, default=100,
                      help='training steps of the example task')
    demo.add_argument('--rounds', type=int, default=1,
                      help='launches of each variant, alternating')
    demo.add_argument('--output', help='write both records as JSON here')
    down = sub.add_parser('down', help='stop everything the cloud started')
    down.add_argument('--purge', action='store_true',
                      help='also remove the state directory')
    sub.add_parser('status', help='show the recorded services')
    tempest = sub.add_parser('tempest', help='run tempest against the cloud')
    tempest.add_argument('--regex', default=ci.MLACCEL_REGEX)
    tempest.add_argument('--exclude-regex')
    tempest.add_argument('--concurrency', type=int, default=2)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == 'ci':
        lay = aio_layout.Layout(args.base, aio_layout.Settings(
            computes=args.computes, cinder=not args.no_cinder,
            reflink_volumes=not args.plain_volumes))
        return ci.run(lay, args.functional_tests, not args.no_upstream)
    if args.command == 'demo':
        return demo.run(aio_layout.Layout(args.base, aio_layout.Settings()),
                        args.count, args.steps, args.rounds,
                        output=args.output)
    if args.command == 'up':
        lay = aio_layout.Layout(args.base, aio_layout.Settings(
            computes=args.computes, cinder=not args.no_cinder,
            mlaccel=not args.no_mlaccel, controllers=args.controllers,
            reflink_volumes=not args.plain_volumes))
        try:
            cloud.up(lay)
        except BaseException as exc:
            print('[aio] bring-up failed, stopping: %s' % exc,
                  file=sys.stderr)
            cloud.down(lay)
            return 1
        return 0
    lay = aio_layout.Layout(args.base)
    if args.command == 'down':
        try:
            seconds = cloud.down(lay, purge=args.purge)
        except procs.ServiceError as exc:
            print('[aio] %s' % exc, file=sys.stderr)
            return 1
        print('[aio] down in %.1f s, no process left' % seconds)
        return 0
    if args.command == 'status':
        print(json.dumps(cloud.status(lay), indent=1, sort_keys=True))
        return 0
    if not os.path.exists(lay.cloud_file):
        print('[aio] no cloud is up in %s: run "up" first' % lay.base,
              file=sys.stderr)
        return 1
    workspace = tempest_conf.write(lay)
    return subprocess.call(
        ci.tempest_argv(lay, workspace, args.regex, args.exclude_regex,
                        args.concurrency),
        cwd=workspace, env=procs.environ(lay))


if __name__ == '__main__':
    sys.exit(main())
