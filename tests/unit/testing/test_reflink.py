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

"""Clones of files (the test volumes'): reflinks, or copies that keep holes."""

import os
import tempfile

import fixtures
import testtools

from mlaccel_lab.testing import reflink

MIB = 1024 * 1024


class CloneFileTest(testtools.TestCase):

    def test_clone_keeps_bytes_and_holes(self):
        d = self.useFixture(fixtures.TempDir()).path
        src, dst = os.path.join(d, 'src'), os.path.join(d, 'dst')
        with open(src, 'wb') as f:
            f.write(b'a' * MIB)
            f.seek(64 * MIB)
            f.write(b'b' * MIB)
            f.truncate(256 * MIB)
        how = reflink.clone_file(src, dst)
        self.assertIn(how, ('reflink', 'copy'))
        self.assertEqual(256 * MIB, os.path.getsize(dst))
        with open(dst, 'rb') as f:
            self.assertEqual(b'a' * MIB, f.read(MIB))
            f.seek(64 * MIB)
            self.assertEqual(b'b' * MIB, f.read(MIB))
            f.seek(32 * MIB)
            self.assertEqual(b'\0' * MIB, f.read(MIB))
        # Holes stay holes: far less than the apparent size is allocated.
        self.assertLess(os.stat(dst).st_blocks * 512, 16 * MIB)

    def test_reflink_where_a_file_system_has_it(self):
        with reflink.reflink_dir(tempfile.gettempdir(), size_gb=1) as (
                d, how):
            if not how.startswith('reflink'):
                self.skipTest('no reflink here: %s' % how)
            src, dst = os.path.join(d, 'src'), os.path.join(d, 'dst')
            with open(src, 'wb') as f:
                f.write(b'r' * 8 * MIB)
            self.assertEqual('reflink', reflink.clone_file(src, dst))
            self.assertEqual('copy', reflink.clone_file(
                src, dst + '2', reflink=False))
            for path in (dst, dst + '2'):
                with open(path, 'rb') as f:
                    self.assertEqual(b'r' * 8 * MIB, f.read())
        # The loop-mounted file system is gone with the context.
        self.assertFalse(os.path.exists(d))
