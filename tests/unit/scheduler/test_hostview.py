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

"""The scheduler's view of the reports, worked out from the last one."""

import random

from mlaccel import hostreport
from mlaccel.scheduler import hostview
from tests import fixtures as mlaccel_fixtures
from tests import testcase

IMAGES = ['img%d' % i for i in range(5)]


def random_report(rng, host, now):
    return hostreport.HostReport(
        host, now - rng.uniform(0, 20),
        cached_images=frozenset(rng.sample(IMAGES, rng.randint(0, 3))),
        fetch_bandwidth=rng.choice([0.0, 1e8, 2e8, 5e8]),
        builds_in_flight=rng.randint(0, 3),
        build_throughput=rng.choice([0.0, 0.5, 1.0, 2.0]),
        build_limit=rng.randint(0, 4))


def summary(view):
    """What a snapshot reads of ``view``, by value."""
    return dict(
        entries={host: (entry.host, entry.report, entry.free,
                        entry.per_byte, entry.fixed)
                 for host, entry in view.entries.items()},
        model=view.model.params, oldest=view.oldest,
        index={image: sorted(entry.host for entry in holders)
               for image, holders in view.index.items()},
        stamps=view.stamps, unmeasured=set(view.unmeasured))


class IncrementalDeriveTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(mlaccel_fixtures.Conf()).conf

    def test_changes_applied_one_refresh_at_a_time_as_from_scratch(self):
        rng = random.Random(3)
        hosts = ['h%02d' % i for i in range(40)]
        reports = {h: random_report(rng, h, 1000.0) for h in hosts[:30]}
        view = hostview.derive(self.conf, reports)
        for step in range(200):
            reports = dict(reports)
            changed = rng.sample(hosts, rng.randint(0, 4))
            for host in changed:
                if host in reports and rng.random() < 0.2:
                    del reports[host]
                else:
                    reports[host] = random_report(rng, host, 1000.0 + step)
            # Hosts named as changed whose reports did not change.
            changed += rng.sample(hosts, 2)
            old = view
            view = hostview.derive(self.conf, reports, old, changed)
            self.assertEqual(summary(hostview.derive(self.conf, reports)),
                             summary(view), 'step %d' % step)
            for host, entry in view.entries.items():
                if host not in changed and (
                        host not in old.unmeasured or
                        old.model == view.model):
                    self.assertIs(old.entries[host], entry)

    def test_nothing_changed_is_the_same_view(self):
        rng = random.Random(4)
        reports = {h: random_report(rng, h, 1.0) for h in ('a', 'b')}
        view = hostview.derive(self.conf, reports)
        self.assertIs(view, hostview.derive(self.conf, reports, view,
                                            ['a', 'gone']))

    def test_changed_options_remake_every_entry(self):
        rng = random.Random(5)
        reports = {h: random_report(rng, h, 1.0) for h in ('a', 'b')}
        view = hostview.derive(self.conf, reports)
        self.conf.set_override('cold_start_seconds', 99.0,
                               'mlaccel_costmodel')
        again = hostview.derive(self.conf, reports, view, [])
        self.assertEqual(summary(hostview.derive(self.conf, reports)),
                         summary(again))
        self.assertIsNot(view.entries['a'], again.entries['a'])
