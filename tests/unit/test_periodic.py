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

"""Tests of mlaccel.periodic and mlaccel.daemon (real threads, sockets)."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
import testtools

from mlaccel import daemon
from mlaccel import periodic

HANG = 30.0  # seconds: a hang guard only


class PeriodicTest(testtools.TestCase):

    def test_runs_until_stopped(self):
        loop = periodic.Periodic('t', 0.0, lambda: None)
        loop.start()
        self.assertTrue(loop.wait_until_runs(3, HANG))
        self.assertTrue(loop.stop(HANG))
        self.assertFalse(loop.running)

    def test_failing_pass_goes_on(self):
        errors = []

        def fail():
            raise ValueError('boom')
        loop = periodic.Periodic('t', 0.0, fail, on_error=errors.append)
        loop.start()
        self.assertTrue(loop.wait_until_runs(2, HANG))
        loop.stop(HANG)
        self.assertIsInstance(errors[0], ValueError)

    def test_wake_cuts_the_wait(self):
        loop = periodic.Periodic('t', HANG * 10, lambda: None,
                                 wakeable=True)
        loop.start()
        self.assertTrue(loop.wait_until_runs(1, HANG))
        runs = loop.runs
        loop.wake()
        self.assertTrue(loop.wait_until_runs(runs + 1, HANG))
        self.assertTrue(loop.stop(HANG))

    def test_stop_during_long_interval_is_prompt(self):
        loop = periodic.Periodic('t', HANG * 10, lambda: None)
        loop.start()
        self.assertTrue(loop.wait_until_runs(1, HANG))
        self.assertTrue(loop.stop(HANG))

    def test_interval_read_each_pass(self):
        reads = []
        gate = threading.Event()

        def interval():
            reads.append(1)
            if len(reads) >= 3:
                gate.set()
            return 0.0
        loop = periodic.Periodic('t', interval, lambda: None)
        loop.start()
        self.assertTrue(gate.wait(HANG))
        loop.stop(HANG)

    def test_external_stop_event_and_restart(self):
        event = threading.Event()
        loop = periodic.Periodic('t', 0.0, lambda: None, stop_event=event)
        loop.start()
        self.assertTrue(loop.wait_until_runs(1, HANG))
        self.assertTrue(loop.stop(HANG))
        self.assertTrue(event.is_set())
        runs = loop.runs
        loop.start()
        self.assertTrue(loop.wait_until_runs(runs + 1, HANG))
        self.assertTrue(loop.stop(HANG))

    def test_setting_the_owners_event_stops_the_loop(self):
        event = threading.Event()
        loop = periodic.Periodic('t', HANG, lambda: None, stop_event=event)
        loop.start()
        self.assertTrue(loop.wait_until_runs(1, HANG))
        event.set()  # during a wait of HANG seconds
        deadline = time.monotonic() + HANG
        while loop.running and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertFalse(loop.running)

    def test_wakeable_loop_refuses_an_owners_stop_event(self):
        # It waits on its wake event and would miss the owner's until the
        # interval ended.
        self.assertRaises(ValueError, periodic.Periodic, 't', 1.0,
                          lambda: None, wakeable=True,
                          stop_event=threading.Event())

    def test_stop_from_the_pass_does_not_wait(self):
        holder, stopped = [], threading.Event()

        def stop_from_the_pass():
            holder[0].stop()
            stopped.set()

        loop = periodic.Periodic('t', 0.0, stop_from_the_pass)
        holder.append(loop)
        loop.start()
        # An event, not wait_for_runs(): the pass may be over before it
        # would be called.
        self.assertTrue(stopped.wait(HANG))
        self.assertTrue(loop.stop(HANG))
        self.assertEqual(1, loop.runs)

    def test_run_once(self):
        calls = []
        loop = periodic.Periodic('t', 1.0, lambda: calls.append(1))
        loop.run_once()
        self.assertEqual(([1], 1), (calls, loop.runs))


class NotifyTest(testtools.TestCase):

    def _socket(self):
        path = os.path.join(self.useFixture_tmp(), 'notify')
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(HANG)
        self.addCleanup(sock.close)
        return path, sock

    def useFixture_tmp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        return tmp.name

    def test_ready(self):
        path, sock = self._socket()
        self.patch(os, 'environ', dict(os.environ, NOTIFY_SOCKET=path))
        self.assertTrue(daemon.notify('READY=1'))
        self.assertEqual(b'READY=1', sock.recv(100))

    def test_abstract_socket(self):
        name = 'mlaccel-test-%d' % os.getpid()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind('\0' + name)
        sock.settimeout(HANG)
        self.addCleanup(sock.close)
        self.patch(os, 'environ', dict(os.environ, NOTIFY_SOCKET='@' + name))
        self.assertTrue(daemon.notify('STOPPING=1'))
        self.assertEqual(b'STOPPING=1', sock.recv(100))

    def test_no_socket(self):
        env = dict(os.environ)
        env.pop('NOTIFY_SOCKET', None)
        self.patch(os, 'environ', env)
        self.assertFalse(daemon.notify('READY=1'))

    def test_unreachable_socket(self):
        self.patch(os, 'environ', dict(
            os.environ, NOTIFY_SOCKET=os.path.join(self.useFixture_tmp(),
                                                   'none')))
        self.assertFalse(daemon.notify('READY=1'))


class ReloadTest(testtools.TestCase):

    def test_reload_changes_debug(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, 'test.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\ndebug = false\n')
        conf = cfg.ConfigOpts()
        logging.register_options(conf)
        conf(args=['--config-file', path])
        self.assertFalse(conf.debug)
        with open(path, 'w') as f:
            f.write('[DEFAULT]\ndebug = true\n')
        daemon.reload_config(conf)
        self.assertTrue(conf.debug)

    def test_real_sighup_and_notify(self):
        """A serving process reloads on SIGHUP, says READY and STOPPING."""
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, 'test.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\ndebug = false\n')
        notify = os.path.join(tmp.name, 'notify')
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(notify)
        sock.settimeout(HANG)
        self.addCleanup(sock.close)
        script = textwrap.dedent('''
            import sys
            from oslo_config import cfg
            from oslo_log import log as logging
            from mlaccel import daemon
            conf = cfg.ConfigOpts()
            logging.register_options(conf)
            conf(args=['--config-file', sys.argv[1]])
            logging.setup(conf, 'test')
            def stop():
                print('debug=%s' % conf.debug, flush=True)
            daemon.serve(conf, 'test', lambda: None, stop)
            ''')
        env = dict(os.environ, NOTIFY_SOCKET=notify,
                   OS_NOVA_DISABLE_EVENTLET_PATCHING='1')
        proc = subprocess.Popen([sys.executable, '-c', script, path],
                                env=env, stdout=subprocess.PIPE,
                                cwd=os.getcwd())
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertEqual(b'READY=1', sock.recv(100))
        with open(path, 'w') as f:
            f.write('[DEFAULT]\ndebug = true\n')
        proc.send_signal(signal.SIGHUP)
        for line in proc.stdout:  # the log goes to stdout
            if b'Reloading the configuration' in line:
                break
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(b'STOPPING=1', sock.recv(100))
        out, _ = proc.communicate(timeout=HANG)
        self.assertEqual(0, proc.returncode)
        self.assertIn(b'debug=True', out)
