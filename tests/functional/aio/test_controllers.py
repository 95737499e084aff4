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

"""Two controllers on a three-member etcd cluster, failures made for real.

Needs a cloud brought up with ``python -m mlaccel_lab.testing.aio up
--controllers 2`` and named by ``$MLACCEL_AIO_BASE``; skipped on a cloud of
one controller. Real parts: two nova-scheduler, two cinder-scheduler and
two pool manager processes, each controller's on its own etcd member, the
computes' agents on the third; etcd members, schedulers and managers are
killed with SIGKILL, as a crash or a lost node kills them. Each test names
its bound and measures it.
"""

import concurrent.futures
import datetime
import os
import re
import time
import urllib.parse

from mlaccel_lab.testing.aio import agents
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import pools
from mlaccel_lab.testing.aio import procs
from tests.functional.aio import test_pool

WAIT = test_pool.WAIT
#: Seconds a lost etcd member may take to serve again once restarted, and
#: the reports to be read through it.
MEMBER_BACK = 60.0
_FALLBACK = re.compile(r'^(\S+ \S+) .*unreadable, scheduling without host '
                       r'reports', re.M)
_LEADS = re.compile(r'^(\S+ \S+) .*This pool manager is the leader now',
                    re.M)


class ControllersTest(test_pool.PoolCloudBase):

    exclusive = True

    def setUp(self):
        super().setUp()
        if not self.lay.etcd:
            self.skipTest('the cloud has one controller')

    def reports_through(self, member):
        return agents.reports(self.lay, self.lay.etcd_url(member))

    def wait_reports_through(self, member, timeout):
        want = set(self.lay.compute_hosts())
        return self.wait(lambda: set(self.reports_through(member)) == want,
                         'both computes\' reports through etcd member %d'
                         % member, timeout=timeout)

    def boot(self, count):
        """Boot ``count`` servers of the test image; their final states."""
        def one(i):
            server = self.conn.compute.create_server(
                name='mlaccel-controllers-%d' % i,
                image_id=self.aio.cloud['image_id'],
                flavor_id=self.aio.cloud['flavor_id'], networks='none')
            self.addCleanup(self.conn.compute.delete_server, server.id,
                            ignore_missing=True)
            return server.id
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            ids = list(pool.map(one, range(count)))
        return ids

    def final(self, server_ids):
        """``{server id: server}`` once each is ACTIVE or in ERROR."""
        def done():
            found = {i: self.conn.compute.get_server(i) for i in server_ids}
            if all(s.status in ('ACTIVE', 'ERROR') for s in found.values()):
                return found
        return self.wait(done, 'the servers to be ACTIVE or in ERROR')

    def test_every_controller_runs_and_reads_every_report(self):
        for name in ('nova-scheduler', 'cinder-scheduler'):
            for service in (name, cloud.controller_service(name, 2)):
                self.assertTrue(procs.running(self.lay, service), service)
        for service in pools.managers(self.lay):
            self.assertTrue(procs.running(self.lay, service), service)
        for member in range(aio_layout.ETCD_MEMBERS):
            self.wait_reports_through(member, WAIT)

    def test_a_lost_etcd_member_fails_no_boot_and_comes_back(self):
        """No boot fails while a member is lost; it comes back.

        Bound: the member serves, and reports flow through it, within
        ``MEMBER_BACK`` s of its restart.
        """
        lost = 1   # the second controller's own member
        self.kill_etcd(lost)
        self.assert_boots_active(2)
        # The other members carry the reports meanwhile.
        self.wait_reports_through(0, WAIT)
        started = time.monotonic()
        self.ensure_etcd(lost)
        self.wait_reports_through(lost, MEMBER_BACK)
        print('etcd member serving reports %.1f s after its restart'
              % (time.monotonic() - started))

    def test_quorum_lost_boots_go_on_then_reports_return(self):
        """Two of three members lost: stock scheduling, then recovery.

        Bounds: each nova-scheduler says it schedules without host reports
        within the etcd client's timeout plus ``refresh_interval`` (plus
        ten seconds of slack) of the loss; no boot fails meanwhile; fresh
        reports, taken after the restart, are read again within
        ``MEMBER_BACK`` s of it.
        """
        schedulers = ['nova-scheduler',
                      cloud.controller_service('nova-scheduler', 2)]
        # Each reads the bus now (one that lost its member in a test just
        # before may not have read it again yet, and would log nothing).
        for name in schedulers:
            self.wait(lambda: self.reads_bus(name),
                      '%s to read the bus' % name, timeout=MEMBER_BACK)
        marks = {name: self.log_size(name) for name in schedulers}
        timeout = float(urllib.parse.parse_qs(urllib.parse.urlsplit(
            self.lay.etcd_url(0)).query)['timeout'][0])
        bound = timeout + self.conf.mlaccel_statebus.refresh_interval + 10.0
        lost = datetime.datetime.now()
        self.kill_etcd(1, 2)
        self.assert_boots_active(2)
        for name in schedulers:
            line = self.wait(lambda: _FALLBACK.search(
                self.log_since(name, marks[name])),
                '%s to fall back to stock scheduling' % name)
            seconds = (datetime.datetime.strptime(
                line.group(1), '%Y-%m-%d %H:%M:%S.%f') - lost).total_seconds()
            print('%s fell back %.1f s after the quorum\'s loss (bound '
                  '%.0f s)' % (name, seconds, bound))
            self.assertLess(seconds, bound)
        restarted = time.time()
        started = time.monotonic()
        for member in (1, 2):
            self.ensure_etcd(member)

        def fresh():
            got = self.reports_through(0)
            return set(got) == set(self.lay.compute_hosts()) and all(
                r.timestamp > restarted for r in got.values())
        self.wait(fresh, 'reports taken after the restart',
                  timeout=MEMBER_BACK)
        for name in schedulers:
            self.wait(lambda: 'answers again' in
                      self.log_since(name, marks[name]).split(
                          'scheduling without host reports', 1)[-1],
                      '%s to read the bus again' % name,
                      timeout=MEMBER_BACK)
        print('fresh reports and both schedulers back %.1f s after the '
              'restart' % (time.monotonic() - started))

    def kill_etcd(self, *members):
        """SIGKILL etcd ``members``; each is started again at cleanup."""
        for member in members:
            procs.kill(self.lay, 'etcd-%d' % member)
            self.addCleanup(self.ensure_etcd, member)

    def assert_boots_active(self, count):
        """Boot ``count`` servers; each must end ACTIVE."""
        servers = self.final(self.boot(count))
        self.assertEqual(['ACTIVE'] * count,
                         [s.status for s in servers.values()],
                         [s.fault for s in servers.values()])

    def reads_bus(self, name):
        """Whether ``name``'s last word on the bus is that it reads it."""
        text = self.log_since(name, 0)
        lost = text.rfind('scheduling without host reports')
        return lost < 0 or 'answers again' in text[lost:]

    def log_size(self, name):
        return os.path.getsize(procs.log_path(self.lay, name))

    def log_since(self, name, offset):
        with open(procs.log_path(self.lay, name), errors='replace') as f:
            f.seek(offset)
            return f.read()

    def ensure_etcd(self, member):
        name = 'etcd-%d' % member
        if not procs.running(self.lay, name):
            cloud.start_etcd(self.lay, member)
            procs.wait_port(self.lay, name,
                            self.lay.ports.etcd_client(member), MEMBER_BACK,
                            probe=cloud.etcd_serves)

    def test_a_scheduler_killed_mid_burst(self):
        """The other scheduler serves; no boot gets NoValidHost.

        A request the killed scheduler had taken fails as it does without
        mlaccel (the conductor's call to it times out); every later one is
        served by the other controller's scheduler.
        """
        self.addCleanup(self.ensure_scheduler)
        first = self.boot(3)
        procs.kill(self.lay, 'nova-scheduler')
        later = self.boot(3)
        servers = self.final(first + later)
        faults = {i: (s.fault or {}).get('message', '')
                  for i, s in servers.items() if s.status == 'ERROR'}
        print('%d of %d servers in ERROR: %s' % (
            len(faults), len(servers), sorted(set(faults.values()))))
        for server_id, message in faults.items():
            self.assertNotIn('valid host', message.lower(), server_id)
        self.assertEqual({}, {i: faults[i] for i in later if i in faults})

    def ensure_scheduler(self):
        if procs.running(self.lay, 'nova-scheduler'):
            return
        since = time.time()
        cloud.start_controller_service(self.lay, 'nova-scheduler')

        def back():
            return any(cloud.reported_since(svc, since)
                       for svc in self.conn.compute.services(
                           binary='nova-scheduler', host='aio'))
        self.wait(back, 'nova-scheduler to report in again')

    def leader(self):
        """The pool manager that took the lead last, and when (log time)."""
        led = []
        for name in pools.managers(self.lay):
            if not procs.running(self.lay, name):
                continue
            with open(procs.log_path(self.lay, name),
                      errors='replace') as f:
                times = _LEADS.findall(f.read())
            if times:
                led.append((times[-1], name))
        return max(led) if led else None

    def test_the_leading_pool_manager_killed_mid_refill(self):
        """Another manager leads; no member is built twice or orphaned.

        Bound: ``[mlaccel_pool] leader_lease`` plus a round, plus ten
        seconds of slack.
        """
        bound = (self.conf.mlaccel_pool.leader_lease
                 + self.conf.mlaccel_pool.interval + 10.0)
        spec = self.make_pool(2)
        self.wait(lambda: self.servers(spec.key), 'a member being built',
                  timeout=120)
        _, leader = self.wait(self.leader, 'a leading pool manager')
        procs.kill(self.lay, leader)
        killed = datetime.datetime.now()
        self.addCleanup(self.ensure_managers)
        took = self.wait(lambda: (lambda led: led if led and led[1] != leader
                                  else None)(self.leader()),
                         'another manager to lead', timeout=bound + 30)
        seconds = (datetime.datetime.strptime(
            took[0], '%Y-%m-%d %H:%M:%S.%f') - killed).total_seconds()
        print('pool manager failover: %.1f s (bound %.0f s)'
              % (seconds, bound))
        self.assertLess(seconds, bound)
        self.wait(lambda: self.settled(spec.key, 2), 'two warm members')
        self.assertEqual(set(self.idle(spec.key)), self.servers(spec.key))
        self.assert_counted(spec.key)

    def ensure_managers(self):
        for name in pools.managers(self.lay):
            if not procs.running(self.lay, name):
                pools.start_controller_manager(self.lay, name)
