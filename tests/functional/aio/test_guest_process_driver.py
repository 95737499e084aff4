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

"""The test virt driver on the all-in-one cloud: real image transfers into
Nova's cache layout, under nova-compute's own lock, and real guest
processes.

Needs a running cloud (``python -m mlaccel_lab.testing.aio up``) named by
``$MLACCEL_AIO_BASE``; skipped otherwise. Only the hypervisor is fake.
"""

import base64
import hashlib
import os
import time

import testtools

from mlaccel.tempest import guests
from mlaccel_lab.testing.aio import fixture

GUEST = ('#cloud-config\nruncmd:\n'
         '  - [python, -m, mlaccel_lab.testing.idle_guest]\n')


def guest_pids(server_id):
    return guests.with_environ('MLACCEL_INSTANCE_UUID', server_id)


class GuestProcessDriverTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.aio = self.useFixture(fixture.RunningCloud())
        self.conn = self.aio.connect()
        self.hosts = self.aio.layout.compute_hosts()

    def make_image(self, size):
        image = self.conn.image.create_image(
            name='driver-test', data=os.urandom(size), disk_format='raw',
            container_format='bare')
        self.addCleanup(self.conn.image.delete_image, image,
                        ignore_missing=True)
        return self.conn.image.get_image(image)

    def boot(self, image_id, host, user_data=None):
        extra = {'user_data': base64.b64encode(user_data.encode()).decode()
                 } if user_data else {}
        server = self.conn.compute.create_server(
            name='driver-test', image_id=image_id,
            flavor_id=self.aio.cloud['flavor_id'], networks='none',
            availability_zone='nova:%s' % host, **extra)
        self.addCleanup(self.delete, server)
        return self.conn.compute.wait_for_server(server, interval=0.5,
                                                 wait=180)

    def delete(self, server):
        self.conn.compute.delete_server(server, ignore_missing=True)
        self.conn.compute.wait_for_delete(server, interval=0.5, wait=120)

    def cache_file(self, host, image_id):
        return os.path.join(self.aio.layout.instances_path(host), '_base',
                            hashlib.sha1(image_id.encode()).hexdigest())

    def test_image_fetched_once_into_nova_cache_layout(self):
        size = 3 * 1024 * 1024 + 17
        image = self.make_image(size)
        first, other = self.hosts[0], self.hosts[1]
        self.boot(image.id, first)
        path = self.cache_file(first, image.id)
        with open(path, 'rb') as f:
            self.assertEqual(image.hash_value,
                             hashlib.new(image.hash_algo,
                                         f.read()).hexdigest())
        self.assertEqual(size, os.path.getsize(path))
        self.assertFalse(os.path.exists(self.cache_file(other, image.id)))
        # nova-compute's lock file for it, where the libvirt driver has it.
        self.assertTrue(os.path.exists(os.path.join(
            self.aio.layout.instances_path(first), 'locks',
            'nova-' + os.path.basename(path))))

        # A second server on the same host is a cache hit: same file.
        before = os.stat(path)
        self.boot(image.id, first)
        after = os.stat(path)
        self.assertEqual((before.st_ino, before.st_mtime_ns),
                         (after.st_ino, after.st_mtime_ns))
        # The other host misses and transfers it.
        self.boot(image.id, other)
        self.assertEqual(size, os.path.getsize(self.cache_file(other,
                                                               image.id)))

    def test_guest_process_lives_with_its_server(self):
        host = self.hosts[0]
        server = self.boot(self.aio.cloud['image_id'], host, GUEST)
        pids = guest_pids(server.id)
        self.assertEqual(1, len(pids))
        instance_dir = os.path.join(self.aio.layout.instances_path(host),
                                    server.id)
        with open(os.path.join(instance_dir, 'guest.pid')) as f:
            self.assertEqual(pids[0], int(f.read()))
        deadline = time.monotonic() + 30
        output = ''
        while 'idle guest up' not in output and time.monotonic() < deadline:
            output = self.conn.compute.get_server_console_output(
                server)['output']
            time.sleep(0.3)
        self.assertIn('idle guest up: pid %d instance %s'
                      % (pids[0], server.id), output)

        self.delete(server)
        self.assertEqual([], guest_pids(server.id))
        self.assertFalse(os.path.exists(instance_dir))

    def test_user_data_without_allowed_command_starts_nothing(self):
        server = self.boot(self.aio.cloud['image_id'], self.hosts[0],
                           '#cloud-config\nruncmd:\n  - [sleep, "600"]\n')
        self.assertEqual([], guest_pids(server.id))

    def test_attack_written_program_named_like_an_allowed_one(self):
        # The allow-list once matched a prefix of the command's name: this
        # user-data ran its own program as root on the compute host.
        marker = os.path.join(self.aio.layout.base, 'run', 'owned-%d'
                              % os.getpid())
        server = self.boot(
            self.aio.cloud['image_id'], self.hosts[0],
            '#cloud-config\nwrite_files:\n'
            '  - path: /usr/local/bin/mlaccel-taskd-x\n'
            '    permissions: "0755"\n'
            '    content: "#!/bin/sh\\ntouch %s\\nsleep 600\\n"\n'
            'runcmd:\n  - [/usr/local/bin/mlaccel-taskd-x]\n' % marker)
        self.assertEqual([], guest_pids(server.id))
        self.assertFalse(os.path.exists(marker))
