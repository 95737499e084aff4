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

"""``mlaccel-cinder-cache`` against Cinder's API in this process.

The command runs as a process of its own, with openstacksdk reading a
clouds.yaml scoped to the internal tenant; Cinder's harness API takes
``user:project`` tokens (its noauth middleware).
"""

import json
import os
import subprocess
import sys
import time

from tests.functional.cinder import base

MIB = base.MIB


class CacheCommandTest(base.MirrorTestBase):

    def setUp(self):
        super().setUp()
        path = os.path.join(self.tmp, 'clouds.yaml')
        with open(path, 'w') as f:
            f.write(
                'clouds:\n  internal:\n    auth_type: admin_token\n'
                '    auth:\n      token: "%s:%s"\n      endpoint: "%s/%s"\n'
                % (base.INTERNAL_USER, base.INTERNAL_PROJECT, self.auth_url,
                   base.INTERNAL_PROJECT))
        self.env = dict(os.environ, OS_CLIENT_CONFIG_FILE=path,
                        OS_CLOUD='internal')

    def run_command(self, *argv):
        done = subprocess.run(
            [sys.executable, '-m', 'mlaccel.cmd.cinder_cache', *argv],
            env=self.env, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout, done.stderr

    def wait_no_golden(self):
        deadline = time.monotonic() + 60
        while self.golden_rows() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual([], self.golden_rows())

    def test_prewarm_list_evict(self):
        image = self.images.add(base.image_bytes('cli', 2 * MIB))
        status, out, err = self.run_command('prewarm', image['id'])
        self.assertEqual((0, ''), (status, err))
        self.assertIn('image %s is golden' % image['id'], out)
        [entry] = self.mirror.cache.entries()
        self.assertTrue(entry['pinned'])
        self.assertEqual(1, self.images.downloads[image['id']])
        # A user's request now is a clone.
        volume = self.wait(self.create(image['id']))
        self.assertEqual('available', volume['status'])
        self.assertEqual(1, self.images.downloads[image['id']])

        status, out, err = self.run_command('list', '--json')
        self.assertEqual(0, status)
        [row] = json.loads(out)
        self.assertEqual(image['id'], row['image_id'])
        self.assertEqual(entry['volume_id'], row['volume_id'])
        self.assertTrue(row['pinned'])
        status, out, err = self.run_command('list')
        self.assertEqual(2, len(out.splitlines()))

        status, out, err = self.run_command('evict', image['id'])
        self.assertEqual((0, ''), (status, err))
        self.assertIn('evicted image %s' % image['id'], out)
        self.wait_no_golden()
        self.assertEqual([], self.mirror.cache.entries())

    def test_bad_input_is_one_line_and_changes_nothing(self):
        image = self.images.add(base.image_bytes('bad', 2 * MIB))
        for argv, want_status, want in (
                (['prewarm', 'no-such-image'], 1, 'no-such-image'),
                (['prewarm', image['id'], '--size', '0'], 2,
                 'whole number of GiB'),
                (['evict', image['id']], 1, 'has no golden volume'),
                (['frobnicate'], 2, 'usage error')):
            status, out, err = self.run_command(*argv)
            self.assertEqual(want_status, status, err)
            self.assertEqual(1, len(err.splitlines()), err)
            self.assertTrue(err.startswith('mlaccel-cinder-cache: '), err)
            self.assertIn(want, err)
        self.assertEqual([], self.golden_rows())
        self.assertEqual(0, self.images.downloads[image['id']])
