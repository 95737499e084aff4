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

"""Pre-fetch and the report, on real files and a real state bus.

The fetcher here reads image data from memory instead of Glance (Glance
cannot run in a unit test) and goes through the same
:func:`mlaccel.agent.cachefile.write` as the Glance fetcher.
"""

import os
import time

from mlaccel.agent import builds
from mlaccel.agent import cachefile
from mlaccel.agent import inventory
from mlaccel.agent import prefetch
from mlaccel.agent import report
from mlaccel.statebus import publisher
from tests import fixtures as mlaccel_fixtures
from tests.unit.agent import base

GOOD, BAD = os.urandom(8192), os.urandom(8192)


class MemoryFetcher:
    """A fetcher whose "Glance" is a dict of image data."""

    def __init__(self, settings, cache, data):
        self.settings, self.cache, self.data = settings, cache, data
        self.fetched = []

    def fetch(self, image, stopping):
        self.fetched.append(image.id)
        return cachefile.write(self.settings, image,
                               base.chunks(self.data[image.id]),
                               self.cache.headroom, stopping=stopping)


class Hot:
    """Hot images as Glance would list them."""

    def __init__(self, images):
        self.images = images

    def due(self):
        return True

    def refresh(self):
        return list(self.images)


class PrefetchTest(base.NodeTestCase):

    def setUp(self):
        super().setUp()
        self.cache = inventory.ImageCache(self.settings.cache_dir)
        self.good = base.image('good', GOOD)
        # Glance's hash is of other bytes than the download gives.
        self.bad = base.image('bad', GOOD)
        self.fetcher = MemoryFetcher(self.settings, self.cache,
                                     {'good': GOOD, 'bad': BAD})
        self.builds = builds.BuildTracker(initial=1, max_limit=1)
        self.prefetcher = prefetch.Prefetcher(
            self.fetcher, Hot([self.bad, self.good]), self.cache,
            self.builds, max_fetches=2)

    def run_round(self):
        for thread in self.prefetcher.round():
            thread.join(30)

    def test_hot_images_fetched_corrupt_one_discarded(self):
        self.cache.scan()
        self.run_round()
        self.run_round()
        self.assertEqual(frozenset({'good'}), self.cache.image_ids())
        self.assertEqual([inventory.cache_name('good')], self.cache_files())
        self.assertIn('Pre-fetch failed, nothing kept', self.log.output)
        self.assertGreater(self.prefetcher.bandwidth, 0)
        # The corrupt image waits for its backoff: no third download.
        fetched = list(self.fetcher.fetched)
        self.run_round()
        self.assertEqual(fetched, self.fetcher.fetched)

    def test_builds_at_their_limit_come_first(self):
        self.builds.started('a-build', 100.0)
        self.cache.scan()
        self.run_round()
        self.assertEqual([], self.fetcher.fetched)
        self.builds.ended('a-build', 110.0)
        self.run_round()
        self.assertNotEqual([], self.fetcher.fetched)

    def test_past_headroom_prefetch_stops_and_report_says_so(self):
        self.cache.scan()
        self.cache.headroom = self.cache.free_bytes
        self.run_round()
        self.assertEqual([], self.fetcher.fetched)
        self.assertIsNotNone(self.prefetcher.no_room)
        self.assertIn('Pre-fetching stops', self.log.output)
        made = report.assemble('cmp1', self.cache, self.builds,
                               self.prefetcher)
        self.assertEqual(0, made.cache_free_bytes)
        self.assertEqual([], self.cache_files())


class ReporterTest(base.NodeTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(mlaccel_fixtures.Conf())
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(
            self.conf.conf, 'redis'))
        self.cache = inventory.ImageCache(self.settings.cache_dir)
        self.cache.learn(['img'])
        self.builds = builds.BuildTracker(initial=3)
        self.publisher = publisher.Publisher(
            'cmp1', self.conf.conf, host_keys=self.bus.host_keys('cmp1'))
        self.reporter = report.Reporter(
            self.publisher, lambda: report.assemble(
                'cmp1', self.cache, self.builds),
            self.cache.scan, interval=3600, tick=0.1, conf=self.conf.conf)
        self.addCleanup(self.publisher.stop)

    def on_bus(self):
        cache = self.bus.cache()
        cache.refresh()
        return cache.snapshot().get('cmp1')

    def test_report_matches_cache_and_publishes_on_change(self):
        self.assertTrue(self.reporter.step(now=0))
        seen = self.on_bus()
        self.assertEqual(frozenset(), seen.cached_images)
        self.assertEqual(3, seen.build_limit)
        self.assertFalse(self.reporter.step(now=1))  # nothing changed
        os.makedirs(self.settings.cache_dir)
        with open(os.path.join(self.settings.cache_dir,
                               inventory.cache_name('img')), 'wb') as f:
            f.write(b'disk')
        self.builds.started('b1', time.time())
        self.assertTrue(self.reporter.step(now=2))
        seen = self.on_bus()
        self.assertEqual(frozenset({'img'}), seen.cached_images)
        self.assertEqual(1, seen.builds_in_flight)
        self.assertEqual(self.cache.room(), seen.cache_free_bytes)

    def test_unreachable_bus_backs_off_and_recovers(self):
        self.assertTrue(self.reporter.step(now=0))
        self.bus.server.kill()
        self.builds.started('b1', time.time())
        self.assertFalse(self.reporter.step(now=1))
        self.assertIn('retrying with backoff', self.log.output)
        self.assertFalse(self.reporter.step(now=1.5))  # backing off
        self.bus.server.start()
        self.assertTrue(self.reporter.step(now=100))
        self.assertEqual(1, self.on_bus().builds_in_flight)
        self.assertIn('on the state bus again', self.log.output)
