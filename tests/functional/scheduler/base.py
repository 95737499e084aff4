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

"""Nova's in-process harness set up the way an operator sets up mlaccel.

Every test here starts Nova's real API, conductor, scheduler and placement
in-process (``ProviderUsageBaseTestCase``) with three computes on
``fake.MediumFakeDriver``: the virt driver is the one part faked, since no
hypervisor runs here. nova.conf is set from :data:`NOVA_CONF`, the snippet
the README tells operators to paste, and host reports travel over a real
state bus (a tooz file directory or a real ``redis-server``).
"""

import os
import sys
import tempfile
import time

from nova.tests.functional import integrated_helpers
from oslo_config import cfg
import tooz
from tooz import coordination

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from mlaccel import statebus
from tests import fixtures as mlaccel_fixtures
from tests.functional import cell_lock

# Before any harness is made: see tests.functional.cell_lock.
cell_lock.install()

#: The nova.conf lines README.rst gives operators (test_loading checks that
#: the README still says exactly this). The tests point ``backend_url`` at
#: their own bus.
NOVA_CONF = """\
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = mlaccel.scheduler.filters.all_filters
enabled_filters = ComputeFilter,ComputeCapabilitiesFilter,\
ImagePropertiesFilter,ServerGroupAntiAffinityFilter,\
ServerGroupAffinityFilter,BuildSlotFilter
weight_classes = nova.scheduler.weights.all_weighers,\
mlaccel.scheduler.weights.all_weighers

[mlaccel_statebus]
backend_url = redis://127.0.0.1:6379
"""

HOSTS = ('host1', 'host2', 'host3')

# Images of nova's GlanceFixture: WANTED is the one the tests boot and the
# reports say is cached; FILLER only loads hosts (no host report lists it);
# OTHER is a second wanted image.
WANTED = '155d900f-4e14-4e4c-a73d-069cbf4541e6'
OTHER = 'a2459075-d96c-40d5-893e-577ff92e721c'
FILLER = '76fa36fc-c930-4bf3-8c8a-ea2a2420deb6'

#: The host stock weighers pick after :meth:`NovaHarnessBase._load_hosts`:
#: the one with the most free RAM, vCPUs and disk. StockPlacementTest shows
#: that nova's own configuration picks it.
STOCK_HOST = 'host3'

REFRESH_TIMEOUT = 30.0


def parse_ini(text):
    """Parse nova.conf text the way oslo.config does.

    :returns: ``{group: {option: [raw values]}}``.
    """
    with tempfile.NamedTemporaryFile('w', suffix='.conf') as f:
        f.write(text)
        f.flush()
        sections = {}
        cfg.ConfigParser(f.name, sections).parse()
    return sections


def nova_conf_overrides(text, conf=cfg.CONF):
    """``[(group, option, value)]`` to set ``conf`` as ``text`` would."""
    overrides = []
    for group, options in parse_ini(text).items():
        for name, values in options.items():
            opt = conf._get_opt_info(name, group)['opt']
            overrides.append((group, name, values if opt.multi
                              else values[-1]))
    return overrides


def api_paste_config():
    """Nova's api-paste.ini as installed with nova in this environment."""
    return os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')


class NovaHarnessBase(integrated_helpers.ProviderUsageBaseTestCase):
    """Nova's harness with fake computes, a nova.conf and a state bus.

    The state bus is the test's own. The process-wide report cache the
    plugins read is made afresh for each test (and stopped after it), so it
    reads this test's bus.
    """

    compute_driver = 'fake.MediumFakeDriver'

    #: the compute hosts started
    hosts = HOSTS

    #: nova.conf text applied before the services start; None: nova's
    #: defaults.
    nova_conf = None

    #: 'file' or 'redis': the state bus backend.
    backend = 'file'

    def setUp(self):
        # Filters and weighers are loaded when the scheduler service starts
        # in super().setUp(), so nova.conf must be set first.
        if self.nova_conf is not None:
            for group, name, value in nova_conf_overrides(self.nova_conf):
                self.flags(**{name: value, 'group': group})
        self.flags(api_paste_config=api_paste_config(), group='wsgi')
        super().setUp()
        conf = mlaccel_conf.CONF
        self.bus = self.useFixture(
            mlaccel_fixtures.StateBus(conf, self.backend))
        self.flags(refresh_interval=0.1, group='mlaccel_statebus')
        self.cache = self.useFixture(
            mlaccel_fixtures.ProcessReportCache(conf)).cache
        for host in self.hosts:
            self._start_compute(host)
        flavors = {f['name']: f['id'] for f in self.api.get_flavors()}
        self.small_flavor = flavors['m1.tiny']
        self.big_flavor = flavors['m1.medium']

    def _boot(self, image, flavor=None, host=None):
        """Boot one server; return the host it became ACTIVE on."""
        server = self._create_server(
            image_uuid=image, flavor_id=flavor or self.small_flavor,
            networks='none', host=host)
        return server['OS-EXT-SRV-ATTR:host']

    def _load_hosts(self):
        """Make host1 the fullest host, host3 the emptiest (STOCK_HOST)."""
        self.assertEqual('host1', self._boot(FILLER, self.big_flavor,
                                             host='host1'))
        # No periodic runs after these boots: the computes' io_workload stat
        # still counts them as builds, which BuildSlotFilter must not.
        self.assertEqual('host2', self._boot(FILLER, host='host2'))


class PluginTestBase(NovaHarnessBase):
    """The harness with mlaccel configured as the README says."""

    nova_conf = NOVA_CONF

    def setUp(self):
        super().setUp()
        self._publishers = {}

    def _publish(self, host, **fields):
        """Publish a valid report for ``host`` with the real Publisher."""
        fields.setdefault('timestamp', time.time())
        fields['cached_images'] = frozenset(fields.get('cached_images', ()))
        publisher = self._publishers.get(host)
        if publisher is None:
            publisher = self._publishers[host] = self.bus.publisher(host)
        publisher.publish(hostreport.HostReport(host=host, **fields))

    def _publish_raw(self, member, raw):
        """Join the bus as ``member`` with ``raw`` bytes as its report.

        This bypasses the Publisher's encoding and checks.
        """
        coord = statebus.coordinator(mlaccel_conf.CONF, member)
        coord.start(start_heart=True)
        self.addCleanup(self._stop_quietly, coord)
        group = statebus.group_id(mlaccel_conf.CONF)
        try:
            coord.create_group(group).get()
        except coordination.GroupAlreadyExist:
            pass
        coord.join_group(group, raw).get()

    @staticmethod
    def _stop_quietly(coord):
        try:
            coord.stop()
        except tooz.ToozError:
            pass  # the test may have stopped the bus

    def _wait_for_reports(self):
        """Wait until the scheduler's cache has read the bus afresh.

        Two refreshes: the first may have started before the last publish.
        """
        self.cache.start()
        self.assertTrue(self.cache.wait_for_refresh(2, REFRESH_TIMEOUT),
                        'the report cache did not refresh within %s s'
                        % REFRESH_TIMEOUT)
        return self.cache.snapshot()

    def _wait_for_unhealthy_bus(self):
        """Wait until the scheduler's cache has found the bus unreadable."""
        deadline = time.monotonic() + REFRESH_TIMEOUT
        self.cache.start()
        while self.cache.healthy is not False:
            remaining = deadline - time.monotonic()
            self.assertGreater(
                remaining, 0, 'the report cache did not find the stopped bus '
                'unreadable within %s s' % REFRESH_TIMEOUT)
            # Bounded wait on the cache's condition, not a sleep: a refresh
            # that fails marks the cache unhealthy before it finishes.
            self.cache.wait_for_refresh(1, min(remaining, 0.5))
        return self.cache.snapshot()
