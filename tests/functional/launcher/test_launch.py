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

"""The launcher against Nova's in-process services, through openstacksdk.

Real parts: Nova's API (wsgi-intercept catches openstacksdk's requests),
conductor, scheduler, placement and compute services; the launcher's
readiness listener on a loopback socket; one real ``mlaccel-taskd`` process
per server, started by :mod:`tests.functional.launcher.guest` in place of
the guest that Nova's fake hypervisor cannot boot. Faults are injected at
the hypervisor (a spawn that fails), at Nova's quota, in the task, and on
the wire (a create whose response is lost). A server group test checks
through Nova that every VM joined the group, on hosts of its own.

Run with stestr (not pytest) and ``OS_NOVA_DISABLE_EVENTLET_PATCHING=1`` for
native threads, ``=0`` (or unset) for eventlet.
"""

import os
import threading

import fixtures
import openstack.exceptions

from mlaccel.launcher import api
from mlaccel.launcher import record
from mlaccel import limiter as mlaccel_limiter
from tests.functional.launcher import base
from tests.functional.launcher import guest


class PeakLimiter(mlaccel_limiter.AdaptiveLimiter):
    """The real limiter, remembering the most slots ever held at once."""

    peak = 0

    def acquire(self, timeout=None):
        token = super().acquire(timeout)
        self.peak = max(self.peak, self.in_flight)
        return token


class LaunchTest(base.LauncherTestCase):

    def test_launch_runs_task_everywhere_and_deletes(self):
        progress = []
        result = self._launch(3, progress=progress.append,
                              submit_options={'seed': 7})
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual(3, len(result['vms']))
        pids = set()
        for vm in result['vms']:
            self.assertEqual('succeeded', vm['state'])
            self.assertEqual({'x': 1}, vm['result']['args'])
            pids.add(vm['result']['pid'])
            self.assertTrue(vm['address'].startswith('tcp:127.0.0.1:'))
            self.assertEqual('Success', vm['nova']['build_result'])
            durations = vm['timeline']['durations']
            for stage in ('scheduling', 'creation', 'buffering', 'running'):
                self.assertIsNotNone(durations[stage], (vm['name'], stage))
                self.assertGreaterEqual(durations[stage], 0)
        self.assertEqual(3, len(pids))  # three daemons ran the task
        task = result['timeline']
        self.assertEqual(['requested', 'scheduled', 'active', 'started',
                          'finished'], sorted(task['events'],
                                              key=task['events'].get))
        self.assertEqual(3, len(result['cleanup']['deleted']))
        self.assertEqual([], result['cleanup']['leaked'])
        self.assertEqual(3, progress[-1]['done'])
        self._assert_nothing_left()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'record.json')
        record.write_json(result, path)
        self.assertIn('succeeded', record.format_table(result))

    def test_anti_affinity_group_spreads_vms_over_hosts(self):
        # Creations run in parallel, so Nova's late anti-affinity check may
        # reschedule a build; a spare compute leaves room for that. Requests
        # weighed alike choose the same host and, both refused by the late
        # check, the same alternate: Nova's remedy for racing requests, a
        # random pick among the best hosts, and a few more attempts keep
        # them from rescheduling in lockstep until the attempts run out.
        self.flags(host_subset_size=3, group='filter_scheduler')
        self.flags(max_attempts=5, group='scheduler')
        for host in ('host2', 'host3', 'host4'):
            self._start_compute(host)
        group = self.conn.compute.create_server_group(
            name='spread', policy='anti-affinity')
        seen = {}

        def progress(snapshot):
            # Once every daemon is ready, before the task runs and the
            # servers are deleted (which drops them from the group).
            if snapshot['ready'] == snapshot['count'] and not seen:
                seen['members'] = self.conn.compute.get_server_group(
                    group.id).member_ids
                seen['hosts'] = {
                    server.id: server.compute_host
                    for server in self.conn.compute.servers(details=True)}
        result = self._launch(3, server_group='spread', progress=progress)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual('spread', result['request']['server_group'])
        ids = sorted(vm['server_id'] for vm in result['vms'])
        self.assertEqual(ids, sorted(seen['members']))
        self.assertEqual(ids, sorted(seen['hosts']))
        self.assertEqual(3, len(set(seen['hosts'].values())), seen['hosts'])
        self._assert_nothing_left()
        # A deleted server leaves the group when Nova finishes its deletion
        # (the server may still be listed DELETED until then).
        self._wait_until(lambda: not self.conn.compute.get_server_group(
            group.id).member_ids, 'the group to have no members')

    def test_spawn_failure_half_way_leaves_no_server(self):
        # The second of three servers fails in the hypervisor.
        original = api.Launch.__init__

        def init(launch, *args, **kwargs):
            original(launch, *args, **kwargs)
            guest.FAIL_SPAWN.add(launch.servers.name(1))
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel.launcher.api.Launch.__init__', init))
        result = self._launch(3)
        self.assertEqual('failed', result['outcome'])
        self.assertIn('failed to build', result['error'])
        self.assertIn('injected spawn failure', result['error'])
        self.assertEqual([], result['cleanup']['leaked'])
        self._assert_nothing_left()

    def test_kth_create_refused_by_quota_leaves_no_server(self):
        self.flags(instances=2, group='quota')
        result = self._launch(4, limiter=mlaccel_limiter.AdaptiveLimiter(
            initial=4, max_limit=4))
        self.assertEqual('failed', result['outcome'])
        self.assertIn('Quota exceeded', result['error'])
        self.assertEqual([], result['cleanup']['leaked'])
        self._assert_nothing_left()

    def test_lost_create_response_found_and_deleted(self):
        # Nova creates the server but the launcher never sees the reply:
        # cleanup must find it by its name and metadata tag.
        real_create = self.conn.compute.create_server
        calls = []

        def create_server(**attrs):
            server = real_create(**attrs)
            calls.append(server.id)
            if len(calls) == 2:
                raise openstack.exceptions.HttpException(
                    'connection reset while reading the response')
            return server
        self.useFixture(fixtures.MonkeyPatch(
            'openstack.compute.v2._proxy.Proxy.create_server',
            lambda proxy, **attrs: create_server(**attrs)))
        result = self._launch(3, limiter=mlaccel_limiter.AdaptiveLimiter(
            initial=1, max_limit=1))
        self.assertEqual('failed', result['outcome'])
        self.assertIn(calls[1], result['cleanup']['deleted'])
        self._assert_nothing_left()

    def test_task_failure_deletes_servers(self):
        result = self._launch(2, entry=base.FAIL)
        self.assertEqual('failed', result['outcome'])
        self.assertIn('injected task failure', result['error'])
        self.assertEqual(['failed', 'failed'],
                         [vm['state'] for vm in result['vms']])
        self._assert_nothing_left()

    def test_cancel_while_waiting_deletes_servers(self):
        cancel = threading.Event()

        def progress(snapshot):
            if snapshot['ready']:
                cancel.set()
        error = self.assertRaises(api.LaunchInterrupted, self._launch, 3,
                                  progress=progress, cancel=cancel)
        self.assertEqual('cancelled', error.record['outcome'])
        self.assertEqual([], error.record['cleanup']['leaked'])
        self._assert_nothing_left()

    def test_limiter_bounds_creations_in_flight(self):
        limiter = PeakLimiter(initial=1, min_limit=1, max_limit=1)
        result = self._launch(3, limiter=limiter)
        self.assertEqual('succeeded', result['outcome'], result['error'])
        self.assertEqual(1, limiter.peak)
        # One slot, held from the create call until the server is built:
        # each creation was requested after the previous one was built.
        timelines = [vm['timeline']['events'] for vm in result['vms']]
        requested = sorted(t['requested'] for t in timelines)
        active = sorted(t['active'] for t in timelines)
        for previous_active, next_requested in zip(active, requested[1:]):
            self.assertLessEqual(previous_active, next_requested)
        self._assert_nothing_left()
