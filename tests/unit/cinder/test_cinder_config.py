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

"""mlaccel-config's cinder.conf edits: the mirror-volume driver and weigher.
"""

import contextlib
import io
import os

import fixtures
from oslo_config import cfg

from mlaccel.cmd import config
from tests import testcase

NOVA_CONF = """\
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
enabled_filters = ComputeFilter
weight_classes = nova.scheduler.weights.all_weighers
"""

CINDER_CONF = """\
[DEFAULT]
enabled_backends = lvm,nfs

[lvm]
volume_driver = cinder.volume.drivers.lvm.LVMVolumeDriver
volume_group = cinder-volumes

[nfs]
volume_driver = cinder.volume.drivers.nfs.NfsDriver
"""


def load(path):
    """The options as cinder-volume and cinder-scheduler would read them."""
    conf = cfg.ConfigOpts()
    conf.register_opts([cfg.ListOpt('scheduler_default_weighers',
                                    default=['CapacityWeigher']),
                        cfg.ListOpt('enabled_backends')])
    for section in ('lvm', 'nfs'):
        conf.register_opts([cfg.StrOpt('volume_driver'),
                            cfg.StrOpt('mlaccel_backend_driver'),
                            cfg.StrOpt('volume_group')], group=section)
    conf([], default_config_files=[path])
    return conf


class CinderConfigTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        d = self.useFixture(fixtures.TempDir()).path
        self.nova = os.path.join(d, 'nova.conf')
        self.cinder = os.path.join(d, 'cinder.conf')
        for path, text in ((self.nova, NOVA_CONF),
                           (self.cinder, CINDER_CONF)):
            with open(path, 'w') as f:
                f.write(text)

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        status = None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = config.main(list(argv))
            except SystemExit as exc:
                status = exc.code
        return status, err.getvalue()

    def text(self):
        with open(self.cinder) as f:
            return f.read()

    def test_enable_wraps_the_backend_and_adds_the_weigher(self):
        for _ in range(2):  # the second run changes nothing
            status, err = self.run_main(
                'enable', '--nova-conf', self.nova, '--cinder-conf',
                self.cinder, '--cinder-mirror-backend', 'lvm')
            self.assertEqual((0, ''), (status, err))
            conf = load(self.cinder)
            self.assertEqual('mlaccel.cinder.driver.MirrorVolumeDriver',
                             conf.lvm.volume_driver)
            self.assertEqual('cinder.volume.drivers.lvm.LVMVolumeDriver',
                             conf.lvm.mlaccel_backend_driver)
            self.assertEqual('cinder-volumes', conf.lvm.volume_group)
            self.assertEqual('cinder.volume.drivers.nfs.NfsDriver',
                             conf.nfs.volume_driver)
            self.assertEqual(['CapacityWeigher', 'GoldenImageWeigher'],
                             conf.scheduler_default_weighers)
        status, err = self.run_main('disable', '--nova-conf', self.nova,
                                    '--cinder-conf', self.cinder)
        self.assertEqual((0, ''), (status, err))
        conf = load(self.cinder)
        self.assertEqual('cinder.volume.drivers.lvm.LVMVolumeDriver',
                         conf.lvm.volume_driver)
        self.assertIsNone(conf.lvm.mlaccel_backend_driver)
        self.assertEqual(['CapacityWeigher'], conf.scheduler_default_weighers)

    def test_bad_input_changes_nothing(self):
        before = self.text()
        for argv in (
                ['--cinder-mirror-backend', 'nosuch'],
                ['--cinder-mirror-backend', 'bad section'],
                ['--cinder-mirror-backend', 'DEFAULT']):
            status, err = self.run_main('enable', '--nova-conf', self.nova,
                                        '--cinder-conf', self.cinder, *argv)
            self.assertEqual(2, status)
            self.assertEqual(1, len(err.splitlines()), err)
        status, err = self.run_main('enable', '--nova-conf', self.nova,
                                    '--cinder-mirror-backend', 'lvm')
        self.assertEqual(2, status)
        self.assertIn('needs --cinder-conf', err)
        self.assertEqual(before, self.text())
