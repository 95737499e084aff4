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

"""The forked child's own set-up, tested in real forked processes."""

import io
import os
import sys
import threading
import time


from mlaccel.taskd import runner

from tests import testcase


class TestFreshStdStreams(testcase.TestCase):

    def test_child_writes_although_a_thread_held_stdout_at_fork(self):
        """A child forked while a thread holds stdout's lock still writes.

        The thread is blocked mid-write, holding the buffer's lock, as a
        daemon thread logging at the instant of a fork would be.
        """
        read_fd, write_fd = os.pipe()
        blocked = io.TextIOWrapper(io.BufferedWriter(
            io.FileIO(write_fd, 'w'), buffer_size=1 << 20))
        saved = sys.stdout
        self.addCleanup(setattr, sys, 'stdout', saved)
        self.addCleanup(os.close, read_fd)
        sys.stdout = blocked

        # More than the pipe holds, and nobody reads: the write blocks with
        # the buffer's lock held.
        writer = threading.Thread(
            target=lambda: (blocked.write('x' * (4 << 20)), blocked.flush()),
            daemon=True)
        writer.start()
        time.sleep(0.2)
        self.assertTrue(writer.is_alive())

        pid = os.fork()
        if pid == 0:
            try:
                runner._fresh_std_streams()
                sys.stdout.write('child can write\n')
                sys.stdout.flush()
                os._exit(0)
            finally:
                os._exit(1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            self.fail('the forked child hung writing to stdout')
        self.assertEqual(0, os.waitstatus_to_exitcode(status))
        sys.stdout = saved
        # Unblock the writer thread so that it can finish.
        os.set_blocking(read_fd, False)
        deadline = time.monotonic() + 30
        while writer.is_alive():
            self.assertLess(time.monotonic(), deadline,
                            'the writer thread did not finish')
            try:
                os.read(read_fd, 1 << 20)
            except BlockingIOError:
                time.sleep(0.01)
