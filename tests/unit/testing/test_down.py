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

"""Taking down an all-in-one cloud that runs no service, on real files."""

import contextlib
import io
import os

import fixtures

from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import layout
from mlaccel_lab.testing import reflink
from tests import testcase


class PurgeTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        base = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        self.lay = layout.Layout(base, settings=layout.Settings())
        for name in ('log/nova-api.log', 'data/cinder/volumes/volume-1',
                     'run/bootstrapped', 'etc/nova/nova.conf'):
            path = os.path.join(base, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write('x')
        with open(os.path.join(base, 'settings.json'), 'w') as f:
            f.write('{}')

    def down(self, **kwargs):
        with contextlib.redirect_stdout(io.StringIO()):
            cloud.down(self.lay, **kwargs)

    def test_purge_keeping_the_logs_removes_everything_else(self):
        self.down(purge=True, keep_logs=True)
        self.assertEqual(['log'], os.listdir(self.lay.base))
        self.assertEqual(['nova-api.log'], os.listdir(self.lay.log))

    def test_purge_removes_the_base(self):
        self.down(purge=True)
        self.assertFalse(os.path.exists(self.lay.base))

    def test_without_purge_everything_stays(self):
        self.down()
        self.assertEqual(['data', 'etc', 'log', 'run', 'settings.json'],
                         sorted(os.listdir(self.lay.base)))


class StopWavesTest(testcase.TestCase):

    def test_mlaccel_then_openstack_then_what_they_use(self):
        recorded = ['redis', 'nova-api', 'mlaccel-pool-manager', 'mariadb',
                    'mlaccel-agent-aio1', 'cinder-api', 'etcd-0']
        self.assertEqual(
            [['mlaccel-pool-manager', 'mlaccel-agent-aio1'],
             ['nova-api', 'cinder-api'],
             ['mariadb', 'redis', 'etcd-0']],
            cloud.stop_waves(recorded))


class VolumesTest(testcase.TestCase):
    """Cinder's volume directory on a loop-mounted XFS with reflink.

    Real mounts: the test needs root and xfsprogs, and skips where the
    machine cannot mount one (it then says why).
    """

    def setUp(self):
        super().setUp()
        base = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        os.makedirs(os.path.join(base, 'run'))
        self.lay = layout.Layout(base, settings=layout.Settings())
        self.addCleanup(cloud.unmount_volumes, self.lay)

    def test_reflink_until_the_cloud_is_down(self):
        how = cloud.mount_volumes(self.lay)
        if not how.startswith('reflink'):
            self.skipTest('no reflink here: %s' % how)
        directory = configs.volume_dir(self.lay)
        self.assertTrue(os.path.ismount(directory) or
                        'file system of' in how)
        self.assertEqual(how, cloud.volume_clones(self.lay))
        src = os.path.join(directory, 'volume-1')
        with open(src, 'wb') as f:
            f.write(b'v' * 65536)
        self.assertEqual('reflink', reflink.clone_file(
            src, os.path.join(directory, 'volume-2')))
        # Brought up again over the same base: the mount is kept.
        self.assertTrue(cloud.mount_volumes(self.lay).startswith('reflink'))
        with contextlib.redirect_stdout(io.StringIO()):
            cloud.down(self.lay, purge=True)
        self.assertFalse(os.path.exists(self.lay.base))

    def test_plain_copies_when_asked(self):
        self.lay = layout.Layout(self.lay.base, settings=layout.Settings(
            reflink_volumes=False))
        how = cloud.mount_volumes(self.lay)
        self.assertEqual('plain copies (reflink_volumes is off)', how)
        self.assertEqual(how, cloud.volume_clones(self.lay))
        self.assertFalse(os.path.ismount(configs.volume_dir(self.lay)))

    def test_a_cloud_that_did_not_say(self):
        self.assertTrue(cloud.volume_clones(self.lay).startswith('unknown'))
