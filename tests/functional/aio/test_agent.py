# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""mlaccel-agent's parts against the all-in-one cloud's Glance, Nova and
RabbitMQ.

Needs a running cloud (``python -m mlaccel_lab.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise. The agent's parts read the
computes' own nova.conf files; images are made per test with bytes of
their own, so no compute has them cached.
"""

import collections
import dataclasses
import os
import shutil
import threading
import time
import uuid

import fixtures
import kombu
import testtools

from mlaccel.agent import builds
from mlaccel.agent import cachefile
from mlaccel.agent import cloud as agent_cloud
from mlaccel.agent.fetchers import glance
from mlaccel.agent.fetchers import nova_precache
from mlaccel.agent import hot
from mlaccel.agent import inventory
from mlaccel.agent import notifications
from mlaccel.agent import novaconf
from mlaccel_lab.testing.aio import agents
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import fixture
from mlaccel_lab.testing.aio import procs
from tests import fixtures as mlaccel_fixtures

WAIT = 180


class CloudTestCase(testtools.TestCase):
    """A test on the running cloud, with its servers deleted after it."""

    #: Whether the test restarts parts of the cloud (it then runs alone).
    EXCLUSIVE = False

    def setUp(self):
        super().setUp()
        self.aio = self.useFixture(fixture.RunningCloud(self.EXCLUSIVE))
        self.lay = self.aio.layout
        self.conn = self.aio.connect()

    def create(self, image_id, host=None, name='mlaccel-agent-test'):
        """Ask for a server (on ``host``, if given); it is deleted after."""
        zone = {'availability_zone': 'nova:%s' % host} if host else {}
        server = self.conn.compute.create_server(
            name=name, image_id=image_id,
            flavor_id=self.aio.cloud['flavor_id'], networks='none', **zone)
        self.addCleanup(self.conn.compute.wait_for_delete, server,
                        interval=0.5, wait=WAIT)
        self.addCleanup(self.conn.compute.delete_server, server,
                        ignore_missing=True)
        return server

    def boot(self, host, image_id):
        return self.conn.compute.wait_for_server(
            self.create(image_id, host), interval=0.5, wait=WAIT)


class AgentOnCloudTest(CloudTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.opts = self.conf.conf.mlaccel_agent
        self.cloud = agent_cloud.Cloud(None, connect=lambda name: self.conn)
        self.log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))

    def compute_settings(self, host):
        etc = self.lay.path('etc', 'nova')
        return novaconf.load([os.path.join(etc, 'nova.conf'),
                              os.path.join(etc, 'compute-%s.conf' % host)])

    def fresh_settings(self):
        """A compute-like node of our own with an empty cache."""
        root = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(root, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\nhost = agent-test\nstate_path = %s\n'
                    'force_raw_images = true\n' % root)
        return novaconf.load([path])

    def new_image(self, size=256 * 1024, **properties):
        data = os.urandom(size) + uuid.uuid4().bytes
        image = self.conn.image.create_image(
            name='mlaccel-agent-test-%s' % uuid.uuid4().hex[:8], data=data,
            disk_format='raw',
            container_format='bare', **properties)
        self.addCleanup(self.conn.image.delete_image, image,
                        ignore_missing=True)
        image = self.conn.image.wait_for_status(image, 'active', wait=WAIT)
        return image, data

    def fetcher(self, settings, cls=glance.GlanceFetcher):
        cache = inventory.ImageCache(settings.cache_dir)
        return cls(settings, self.opts, self.cloud, cache), cache

    def test_glance_download_verified_and_renamed_into_place(self):
        image, data = self.new_image()
        settings = self.fresh_settings()
        fetcher, cache = self.fetcher(settings)
        meta = cachefile.ImageMeta.from_glance(
            self.conn.image.get_image(image.id))
        self.assertTrue(meta.hash_value)
        written = fetcher.fetch(meta, threading.Event())
        with open(written.path, 'rb') as f:
            self.assertEqual(data, f.read())
        self.assertEqual(inventory.cache_name(image.id),
                         os.path.basename(written.path))
        self.assertIsNone(fetcher.fetch(meta, threading.Event()))
        cache.learn([image.id])
        cache.scan()
        self.assertEqual(frozenset({image.id}), cache.image_ids())

    def test_hash_mismatch_from_glance_leaves_nothing(self):
        image, _ = self.new_image()
        settings = self.fresh_settings()
        fetcher, _ = self.fetcher(settings)
        meta = dataclasses.replace(
            cachefile.ImageMeta.from_glance(
                self.conn.image.get_image(image.id)),
            hash_value='0' * 128)
        self.assertRaises(cachefile.Corrupt, fetcher.fetch, meta,
                          threading.Event())
        self.assertEqual([], os.listdir(settings.cache_dir))

    def test_image_marked_hot_in_glance_is_listed(self):
        marked, _ = self.new_image(mlaccel_hot='true')
        plain, _ = self.new_image()
        ids = [image.id for image in
               hot.HotImages(self.opts, self.cloud).refresh()]
        self.assertIn(marked.id, ids)
        self.assertNotIn(plain.id, ids)

    def test_tenants_mark_does_not_make_an_image_hot(self):
        tenant = uuid.uuid4().hex      # a project that is not the agent's
        theirs, _ = self.new_image(mlaccel_hot='true', owner=tenant)
        ours, _ = self.new_image(mlaccel_hot='true')
        ids = [image.id for image in
               hot.HotImages(self.opts, self.cloud).refresh()]
        self.assertIn(ours.id, ids)
        self.assertNotIn(theirs.id, ids)
        self.assertIn('not in [mlaccel_agent] hot_image_owners',
                      self.log.output)
        # The operator lists the project: its marks count, and only its.
        self.conf.set('mlaccel_agent', hot_image_owners=[tenant])
        ids = [image.id for image in
               hot.HotImages(self.opts, self.cloud).refresh()]
        self.assertIn(theirs.id, ids)
        self.assertNotIn(ours.id, ids)

    def test_demand_counts_on_public_and_trusted_images_only(self):
        tenant = uuid.uuid4().hex
        community, _ = self.new_image(owner=tenant, visibility='community')
        public, _ = self.new_image(owner=tenant, visibility='public')
        demand = hot.Demand(window=3600, min_builds=1)
        for image in (community, public):
            demand.seen(image.id, time.time())
        ids = [image.id for image in
               hot.HotImages(self.opts, self.cloud, demand=demand).refresh()]
        self.assertIn(public.id, ids)
        self.assertNotIn(community.id, ids)

    def test_hot_images_bounded_per_owner(self):
        owner = uuid.uuid4().hex
        made = {self.new_image(size=3 << 20, mlaccel_hot='true',
                               owner=owner)[0].id for _ in range(2)}
        # Room for one of the owner's two 3 MiB images, not both.
        self.conf.set('mlaccel_agent', hot_image_owners=[owner],
                      hot_max_owner_mb=4)
        ids = {image.id for image in
               hot.HotImages(self.opts, self.cloud).refresh()}
        self.assertEqual(1, len(ids & made))
        self.assertIn('over the bound of %d per owner' % (4 << 20),
                      self.log.output)

    def test_prefetched_image_is_reused_by_nova_compute(self):
        host = self.lay.compute_hosts()[-1]
        image, _ = self.new_image()
        settings = self.compute_settings(host)
        fetcher, _ = self.fetcher(settings)
        final = os.path.join(settings.cache_dir,
                             inventory.cache_name(image.id))
        self.addCleanup(lambda: os.path.exists(final) and os.unlink(final))
        self.assertIsNotNone(fetcher.fetch(cachefile.ImageMeta.from_glance(
            self.conn.image.get_image(image.id)), threading.Event()))
        server = self.boot(host, image.id)
        self.assertEqual(host, server.compute_host)
        with open(procs.log_path(self.lay, 'nova-compute-' + host)) as f:
            log = f.read()
        self.assertIn('Image %s is cached on this host' % image.id, log)
        self.assertNotIn('Fetched image %s' % image.id, log)

    def test_nova_precache_fills_the_cache(self):
        host = self.lay.compute_hosts()[-1]
        aggregate = self.conn.compute.create_aggregate(
            name='mlaccel-agent-%s' % uuid.uuid4().hex[:8])
        self.addCleanup(self.conn.compute.delete_aggregate, aggregate)
        self.conn.compute.add_host_to_aggregate(aggregate, host)
        self.addCleanup(self.conn.compute.remove_host_from_aggregate,
                        aggregate, host)
        self.conf.set('mlaccel_agent', precache_aggregate=aggregate.name,
                      fetch_timeout=WAIT)
        image, data = self.new_image()
        settings = self.compute_settings(host)
        fetcher, _ = self.fetcher(settings, nova_precache.NovaPrecacheFetcher)
        final = os.path.join(settings.cache_dir,
                             inventory.cache_name(image.id))
        self.addCleanup(lambda: os.path.exists(final) and os.unlink(final))
        written = fetcher.fetch(cachefile.ImageMeta.from_glance(
            self.conn.image.get_image(image.id)), threading.Event())
        self.assertEqual(final, written.path)
        with open(final, 'rb') as f:
            self.assertEqual(data, f.read())

    def test_listener_measures_builds_of_its_host(self):
        host = self.lay.compute_hosts()[0]
        settings = self.compute_settings(host)
        tracker = builds.BuildTracker(initial=4)
        pool = 'mlaccel-agent-test-%s' % uuid.uuid4().hex[:8]
        listener = notifications.Listener(settings, pool, tracker)
        self.addCleanup(self.delete_queue, pool)
        listener.start()
        self.addCleanup(listener.stop)
        self.assertTrue(listener.connected.wait(60))
        self.boot(host, self.aio.cloud['image_id'])
        deadline = time.monotonic() + 60
        while tracker.median_duration is None and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertIsNotNone(tracker.median_duration)
        self.assertEqual(0, tracker.in_flight)

    def delete_queue(self, name):
        url = self.lay.transport_url.replace('rabbit://', 'amqp://')
        with kombu.Connection(url) as connection:
            connection.default_channel.queue_delete(queue=name)


class RunningAgentsTest(CloudTestCase):
    """The cloud's own ``mlaccel-agent`` per compute, as deployed.

    The agents are the only producers of host reports; the scheduler runs
    mlaccel's filter and weighers (``mlaccel-config enable``). These tests
    restart agents, a compute and RabbitMQ: each runs alone.
    """

    EXCLUSIVE = True

    def setUp(self):
        super().setUp()
        self.hosts = self.lay.compute_hosts()

    def reports(self):
        return agents.reports(self.lay)

    def wait_report(self, host, predicate, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            report = self.reports().get(host)
            if report is not None and predicate(report):
                return report
            if time.monotonic() > deadline:
                self.fail('the report of %s never passed the check; last: '
                          '%s' % (host, report))
            time.sleep(0.5)

    def new_image(self, size=512 * 1024):
        image = self.conn.image.create_image(
            name='mlaccel-agent-test-%s' % uuid.uuid4().hex[:8],
            data=os.urandom(size) + uuid.uuid4().bytes,
            disk_format='raw', container_format='bare')
        self.addCleanup(self.conn.image.delete_image, image,
                        ignore_missing=True)
        return self.conn.image.wait_for_status(image, 'active', wait=WAIT)

    def compute_log(self, host):
        with open(procs.log_path(self.lay, 'nova-compute-' + host)) as f:
            return f.read()

    def restart_agent(self, host, **options):
        """Restart the agent of ``host`` with ``options`` added.

        The cleanup restarts it as the cloud made it.
        """
        def restart(**opts):
            procs.stop(self.lay, agents.service(host), 30)
            agents.write_config(self.lay, host, **opts)
            agents.start(self.lay, host)
        self.addCleanup(restart)
        restart(**options)

    def cache_names(self, host):
        directory = os.path.join(self.lay.instances_path(host), '_base')
        return {name for name in os.listdir(directory)
                if len(name) == 40 and not name.startswith('.')}

    def test_prefetched_image_draws_its_server_and_is_not_downloaded(self):
        for host in self.hosts:
            # Large enough that its transfer outweighs the hosts' noise in
            # build times (as an ML image does by far).
            image = self.new_image(128 << 20)
            # The operator names the image hot on this host only. Every
            # agent restarts, so that none has build measurements the
            # others lack (a restarted agent measures builds anew).
            for each in self.hosts:
                self.restart_agent(each, **(
                    {'hot_images': image.id} if each == host else {}))
            self.wait_report(host, lambda r: image.id in r.cached_images)
            for other in set(self.hosts) - {host}:
                self.assertNotIn(image.id, self.wait_report(
                    other, lambda r: True).cached_images)
            # The scheduler reads the bus every refresh_interval (1 s).
            time.sleep(5)
            server = self.conn.compute.wait_for_server(
                self.create(image.id), interval=0.5, wait=WAIT)
            self.assertEqual(host, server.compute_host)
            log = self.compute_log(host)
            self.assertIn('Image %s is cached on this host' % image.id, log)
            self.assertNotIn('Fetched image %s' % image.id, log)

    def test_image_in_demand_elsewhere_is_prefetched_here(self):
        builder, other = self.hosts[0], self.hosts[-1]
        image = self.new_image()
        # demand_builds (3) builds on one compute...
        for _ in range(3):
            self.boot(builder, image.id)
        # ...and the other has it before anyone boots it there.
        self.wait_report(other, lambda r: image.id in r.cached_images)
        self.assertNotIn('Fetched image %s' % image.id,
                         self.compute_log(other))

    def test_burst_of_three_times_the_build_limit_all_active_and_spread(self):
        # An agent restarted by an earlier test publishes again within its
        # report interval: wait for every host's report.
        reports = {host: self.wait_report(host, lambda r: True)
                   for host in self.hosts}
        limit = sum(reports[host].build_limit for host in self.hosts)
        self.assertGreater(limit, 0)
        burst = [self.create(self.aio.cloud['image_id'],
                             name='mlaccel-burst-%d' % i)
                 for i in range(3 * limit)]
        done = [self.conn.compute.wait_for_server(server, interval=1,
                                                  wait=WAIT)
                for server in burst]
        self.assertEqual({'ACTIVE'}, {server.status for server in done})
        placed = collections.Counter(server.compute_host for server in done)
        self.assertEqual(set(self.hosts), set(placed), placed)
        # The agents saw every build end.
        for host in self.hosts:
            self.wait_report(host, lambda r: r.builds_in_flight == 0)

    def test_report_on_the_bus_matches_the_cache_on_disk(self):
        image = self.new_image()
        self.conn.compute.wait_for_server(
            self.create(image.id), interval=0.5, wait=WAIT)
        known = {image.id for image in self.conn.image.images()}
        for host in self.hosts:
            # Every image reported is on disk; every file on disk of an
            # image Glance knows is reported (a deleted image's file can
            # no longer be named).
            report = self.wait_report(host, lambda r: self.matches(
                r.cached_images, self.cache_names(host), known))
            free = shutil.disk_usage(self.lay.instances_path(host)).free
            room = free - (agents.HEADROOM_MB << 20)
            # Other writers share the disk: agree within 1 GiB.
            self.assertLess(abs(report.cache_free_bytes - room), 1 << 30)
            self.assertLessEqual(report.build_limit, 10)

    @staticmethod
    def matches(reported, on_disk, known):
        names = {inventory.cache_name(image) for image in reported}
        expected = {image for image in known
                    if inventory.cache_name(image) in on_disk}
        return names <= on_disk and expected <= set(reported)

    def test_nova_compute_restarted_under_the_agent(self):
        host = self.hosts[-1]
        service = agents.service(host)
        pid = procs.pid(self.lay, service)
        before = self.wait_report(host, lambda r: True)
        self.addCleanup(self.ensure_compute, host)
        cloud.stop_compute(self.lay, host, agent=False)
        # The agent goes on reporting while nova-compute is away.
        self.wait_report(host, lambda r: r.timestamp > before.timestamp)
        since = time.time()
        cloud.start_compute(self.lay, host, agent=False)
        cloud.wait_compute_up(self.lay, self.conn, host, since)
        image = self.new_image()
        self.boot(host, image.id)
        # The same agent process saw the new build and its image.
        self.assertEqual(pid, procs.pid(self.lay, service))
        report = self.wait_report(
            host, lambda r: image.id in r.cached_images and
            r.builds_in_flight == 0)
        self.assertGreater(report.timestamp, before.timestamp)

    def test_rabbitmq_restarted_under_the_agents(self):
        builder, other = self.hosts[0], self.hosts[-1]
        pids = [procs.pid(self.lay, agents.service(h)) for h in self.hosts]
        before = self.wait_report(other, lambda r: True)
        self.addCleanup(self.ensure_rabbitmq)
        procs.stop(self.lay, 'rabbitmq', 60)
        # The reports go on (the state bus is not RabbitMQ).
        self.wait_report(other, lambda r: r.timestamp > before.timestamp)
        self.ensure_rabbitmq()
        # Each agent's listener is back on its pool's queue...
        deadline = time.monotonic() + WAIT
        while self.consumers('mlaccel-agent-' + other) < 1:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(1)
        # ...and Nova's notifications reach it: builds elsewhere make the
        # image in demand here.
        image = self.new_image()
        for _ in range(3):
            self.boot(builder, image.id)
        self.wait_report(other, lambda r: image.id in r.cached_images)
        # The same agents all along.
        self.assertEqual(pids, [procs.pid(self.lay, agents.service(h))
                                for h in self.hosts])
        self.assertTrue(all(procs.running(self.lay, agents.service(h))
                            for h in self.hosts))

    def consumers(self, queue):
        url = self.lay.transport_url.replace('rabbit://', 'amqp://')
        try:
            with kombu.Connection(url) as connection:
                return connection.default_channel.queue_declare(
                    queue=queue, passive=True).consumer_count
        except Exception:
            return 0

    def ensure_rabbitmq(self):
        if procs.running(self.lay, 'rabbitmq'):
            return
        cloud.start_rabbitmq(self.lay)
        procs.wait_port(self.lay, 'rabbitmq', self.lay.ports.amqp, 120)
        # Nova's services are back on their queues.
        since = time.time()
        for host in self.hosts:
            cloud.wait_compute_up(self.lay, self.conn, host, since,
                                  timeout=WAIT)

    def ensure_compute(self, host):
        if not procs.running(self.lay, 'nova-compute-' + host):
            since = time.time()
            cloud.start_compute(self.lay, host, agent=False)
            cloud.wait_compute_up(self.lay, self.conn, host, since)
