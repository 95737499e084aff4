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

"""Real Nova objects and host states, and a real state bus, for the
scheduler plugin tests."""

import time

from nova import objects
from nova.scheduler import host_manager
from oslo_utils import uuidutils

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from tests import fixtures as mlaccel_fixtures
from tests import testcase

objects.register_all()

IMAGE = uuidutils.generate_uuid()
OTHER_IMAGE = uuidutils.generate_uuid()


def request_spec(image_id=IMAGE, image_size=None, extra_specs=None,
                 hints=None):
    """A RequestSpec as the scheduler receives it."""
    image = objects.ImageMeta()
    if image_id is not None:
        image.id = image_id
    if image_size is not None:
        image.size = image_size
    flavor = objects.Flavor(name='task', memory_mb=1024, vcpus=1,
                            root_gb=10, ephemeral_gb=0, swap=0,
                            extra_specs=extra_specs or {})
    return objects.RequestSpec(flavor=flavor, image=image, num_instances=1,
                               instance_uuid=uuidutils.generate_uuid(),
                               scheduler_hints=hints or {})


def host(name, aggregates=(), instances=(), **attrs):
    attrs.setdefault('num_io_ops', 0)
    attrs['aggregates'] = [
        objects.Aggregate(id=i, name='agg%d' % i, metadata=metadata)
        for i, metadata in enumerate(aggregates)]
    # What nova.tests' FakeHostState does; importing nova.tests would apply
    # Nova's eventlet monkey patching to the whole test process.
    state = host_manager.HostState(name, name + '-node', None)
    state.instances = {inst.uuid: inst for inst in instances}
    vars(state).update(attrs)
    return state


def instance(image_ref=None):
    """An Instance, loaded with ``image_ref`` or a stub without it.

    Lazy-loading a stub's ``image_ref`` would be a database query.
    """
    inst = objects.Instance(uuid=uuidutils.generate_uuid())
    if image_ref is not None:
        inst.image_ref = image_ref
    return inst


class PluginTestCase(testcase.TestCase):
    """Plugins on a fresh file state bus.

    They read ``mlaccel.conf.CONF`` and the process-wide report cache; both
    point at the test's own bus.
    """

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(mlaccel_fixtures.GlobalConf())
        self.flags.set('mlaccel_statebus', refresh_interval=60.0,
                       report_max_age=30.0)
        self.bus = self.useFixture(mlaccel_fixtures.StateBus(
            mlaccel_conf.CONF, 'file'))
        self.cache = self.useFixture(
            mlaccel_fixtures.ProcessReportCache()).cache

    def publish(self, *reports):
        """Put reports on the bus and read them into the cache.

        Returns the started publishers.
        """
        publishers = []
        for report in reports:
            publishers.append(self.bus.publisher(report.host))
            publishers[-1].publish(report)
        self.cache.refresh()
        self.assertTrue(self.cache.healthy)
        return publishers

    @staticmethod
    def report(host, **fields):
        fields.setdefault('timestamp', time.time())
        return hostreport.HostReport(host, **fields)
