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

"""A bring-up that cannot go on leaves nothing running and says why.

Real sockets and real processes. The services of the cloud itself do not
run here: the step that starts them is replaced by one that starts a real
process the way they are started, then fails as a service would.
"""

import contextlib
import dataclasses
import io
import os
import socket
import sys

import fixtures

from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import layout
from mlaccel_lab.testing.aio import procs
from tests import testcase


def free_ports(count):
    """``count`` loopback ports nothing listened on a moment ago."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(('127.0.0.1', 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class UpTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        base = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        names = [field.name for field in dataclasses.fields(layout.Ports)]
        ports = layout.Ports(**dict(zip(names, free_ports(len(names)))))
        self.lay = layout.Layout(base, settings=layout.Settings(
            ports=ports, mlaccel=False))
        self.addCleanup(cloud.down, self.lay)
        self.out = io.StringIO()

    def up(self):
        with contextlib.redirect_stdout(self.out):
            return cloud.up(self.lay)

    def test_a_held_port_is_named_and_nothing_starts(self):
        holder = socket.socket()
        self.addCleanup(holder.close)
        holder.bind(('127.0.0.1', self.lay.ports.keystone))
        holder.listen()
        err = self.assertRaises(procs.ServiceError, self.up)
        self.assertIn('port %d is held by pid %d'
                      % (self.lay.ports.keystone, os.getpid()), str(err))
        self.assertEqual([], procs.recorded(self.lay))

    def test_a_failed_bring_up_stops_what_it_started(self):
        def start_infra(lay):
            procs.start(lay, 'mariadb', [
                sys.executable, '-c', 'import time; time.sleep(600)'])
            self.assertTrue(procs.running(lay, 'mariadb'))
            raise procs.ServiceError('redis exited before listening')

        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel_lab.testing.aio.cloud.start_infra', start_infra))
        pid_file = os.path.join(self.lay.base, 'pids', 'mariadb.pid')
        err = self.assertRaises(procs.ServiceError, self.up)
        self.assertIn('redis exited', str(err))
        self.assertIn('stopping what it started', self.out.getvalue())
        self.assertEqual([], procs.recorded(self.lay))
        self.assertEqual([], procs.marked(self.lay.base))
        self.assertFalse(os.path.exists(pid_file))
