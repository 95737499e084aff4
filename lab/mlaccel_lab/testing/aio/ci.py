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

"""The CI job on the all-in-one cloud, teardown guaranteed.

Brings the cloud up, runs mlaccel's tempest tests, an upstream tempest
compute API subset (to show mlaccel enabled breaks nothing) and the
functional tests that need the cloud, takes the cloud down whatever
happened, checks that no process is left, and prints one table with the
counts and times of every suite.
"""

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time

from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import procs
from mlaccel_lab.testing.aio import tempest_conf

MLACCEL_REGEX = r'^mlaccel\.tempest\.'
#: Upstream compute API tests that run on fake hypervisors: servers,
#: flavors and their extra specs, multinode placement (same/different host,
#: affinity), hypervisors, services, image metadata, server actions.
UPSTREAM_REGEX = (
    r'^tempest\.api\.compute\.('
    r'servers\.test_create_server|servers\.test_servers\.|'
    r'servers\.test_list_servers_negative|servers\.test_server_actions|'
    r'admin\.test_servers_on_multinodes|admin\.test_flavors|flavors|'
    r'images\.test_image_metadata|admin\.test_hypervisor\.|'
    r'admin\.test_services\.)')
#: What the fake hypervisor and the missing Neutron cannot do.
UPSTREAM_EXCLUDE = (r'test_get_hypervisor_uptime|security_group|'
                    r'test_networks|BootFromVolume|volume_backed|from_image')
FUNCTIONAL_REGEX = r'^tests\.functional\.(aio|devstack)\.'
#: The tests of a cloud of several controllers, run on one of their own.
CONTROLLERS_REGEX = r'^tests\.functional\.aio\.test_controllers\.'

_COUNT = re.compile(r'^ - (Passed|Failed|Skipped): (\d+)\s*$')
#: subunit-trace's line of a failed test: ``{0} test.id [1.2s] ... FAILED``.
_FAILED = re.compile(r'^\{\d+\} (\S+) .*\.\.\. FAILED\s*$')
#: The last line of a traceback: ``SomeError: why``.
_REASON = re.compile(
    r'^\s*([\w.]*(Error|Exception|Failure|Mismatch|Timeout)\w*: .*)$')


def run_suite(name, argv, cwd, env):
    """Run a stestr-style suite, echoing its output; return its counts."""
    started = time.monotonic()
    counts = {'Passed': 0, 'Failed': 0, 'Skipped': 0}
    failing, reasons = [], []
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        sys.stdout.write(line)
        match = _COUNT.match(line)
        if match:
            counts[match.group(1)] = int(match.group(2))
        match = _FAILED.match(line)
        if match:
            failing.append(match.group(1))
        match = _REASON.match(line)
        if failing and match and match.group(1)[:300] not in reasons:
            # subunit-trace prints each traceback twice: keep one.
            reasons.append(match.group(1)[:300])
    code = proc.wait()
    if code == 0 and not counts['Passed']:
        # A suite that found no test (e.g. a plugin not installed) fails.
        code = 1
    return {'suite': name, 'passed': counts['Passed'],
            'failed': counts['Failed'], 'skipped': counts['Skipped'],
            'exit_code': code, 'failing': failing, 'reasons': reasons[:10],
            'seconds': round(time.monotonic() - started, 1)}


def tempest_argv(lay, workspace, regex, exclude=None, concurrency=2):
    argv = [lay.bin('tempest'), 'run', '--config-file',
            os.path.join(workspace, 'etc', 'tempest.conf'),
            '--concurrency', str(concurrency), '--regex', regex]
    if exclude:
        argv += ['--exclude-regex', exclude]
    return argv


def _terminate(signum, frame):
    raise KeyboardInterrupt('signal %d' % signum)


def run(lay, functional_dir=None, upstream=True):
    """The whole job; return its exit code (0: every suite passed)."""
    signal.signal(signal.SIGTERM, _terminate)
    results, failure = [], None
    started = time.monotonic()
    try:
        bringup = cloud.up(lay)
        results.append({'suite': 'bring-up', 'passed': 1, 'failed': 0,
                        'skipped': 0, 'exit_code': 0,
                        'seconds': bringup['total_seconds']})
        workspace = tempest_conf.write(lay)
        env = procs.environ(lay)
        results.append(run_suite('mlaccel tempest', tempest_argv(
            lay, workspace, MLACCEL_REGEX), workspace, env))
        if upstream:
            results.append(run_suite('upstream tempest subset', tempest_argv(
                lay, workspace, UPSTREAM_REGEX, UPSTREAM_EXCLUDE),
                workspace, env))
        if functional_dir:
            results.append(run_suite('functional (aio, devstack)',
                                     functional_argv(
                                         lay, functional_dir,
                                         FUNCTIONAL_REGEX, CONTROLLERS_REGEX),
                                     *functional_env(lay, functional_dir)))
    except (Exception, KeyboardInterrupt) as exc:
        failure = '%s: %s' % (type(exc).__name__, exc)
    finally:
        failure = teardown(lay, results) or failure
    if functional_dir and failure is None:
        # A second cloud: two controllers on etcd, and their own tests.
        multi = aio_layout.Layout(lay.base + '-controllers',
                                  dataclasses.replace(lay.settings,
                                                      controllers=2))
        try:
            bringup = cloud.up(multi)
            results.append({'suite': 'bring-up, two controllers',
                            'passed': 1, 'failed': 0, 'skipped': 0,
                            'exit_code': 0,
                            'seconds': bringup['total_seconds']})
            results.append(run_suite('functional (two controllers)',
                                     functional_argv(multi, functional_dir,
                                                     CONTROLLERS_REGEX),
                                     *functional_env(multi, functional_dir)))
        except (Exception, KeyboardInterrupt) as exc:
            failure = '%s: %s' % (type(exc).__name__, exc)
        finally:
            failure = teardown(multi, results) or failure
    print_summary(results, time.monotonic() - started, failure)
    ok = failure is None and all(r['exit_code'] == 0 and not r['failed']
                                 for r in results)
    return 0 if ok else 1


def functional_env(lay, functional_dir):
    """``(cwd, environment)`` of the functional tests on cloud ``lay``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(functional_dir)))
    env = dict(procs.environ(lay), **{aio_layout.BASE_ENV: lay.base})
    # Nova's functional fixtures patch eventlet in unless told not.
    env.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
    return root, env


def functional_argv(lay, functional_dir, regex, exclude=None):
    root = functional_env(lay, functional_dir)[0]
    argv = [lay.bin('python'), '-m', 'stestr', '--test-path',
            os.path.abspath(functional_dir), '--top-dir', root, 'run']
    if exclude:
        argv += ['--exclude-regex', exclude]
    return argv + [regex]


def teardown(lay, results):
    """Take ``lay`` down, purged; record it; return a failure or None."""
    try:
        seconds = cloud.down(lay, purge=True)
    except procs.ServiceError as exc:
        results.append({'suite': 'teardown (no process left)',
                        'passed': 0, 'failed': 1, 'skipped': 0,
                        'exit_code': 1, 'seconds': 0})
        return str(exc)
    results.append({'suite': 'teardown (no process left)',
                    'passed': 1, 'failed': 0, 'skipped': 0,
                    'exit_code': 0, 'seconds': seconds})
    return None


def print_summary(results, seconds, failure):
    print('\n%-30s %7s %7s %7s %9s'
          % ('suite', 'passed', 'failed', 'skipped', 'seconds'))
    for r in results:
        print('%-30s %7d %7d %7d %9.1f%s' % (
            r['suite'], r['passed'], r['failed'], r['skipped'],
            r['seconds'], '' if r['exit_code'] == 0 else
            '  (exit %d)' % r['exit_code']))
    if failure:
        print('aborted: %s' % failure)
    suites = ('mlaccel', 'upstream', 'functional')
    tests = [r for r in results if r['suite'].startswith(suites)]
    print('aio job: %.1f s; %d passed, %d failed, %d skipped'
          % (seconds, sum(r['passed'] for r in tests),
             sum(r['failed'] for r in tests),
             sum(r['skipped'] for r in tests)))
    # The failed tests and why, under the summary, so a log's tail says it.
    for r in tests:
        for name in r.get('failing', ()):
            print('aio failed: %s' % name)
        for reason in r.get('reasons', ()):
            print('aio why: %s' % reason)
