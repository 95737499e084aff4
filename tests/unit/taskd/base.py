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

"""A real mlaccel-taskd process for the tests, and helpers around it."""

import http.server
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import fixtures

from mlaccel.taskd import client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
SAMPLE = 'tests.unit.taskd.sample_tasks:'


def wait_for(predicate, timeout=30, what='a condition'):
    """Poll ``predicate`` until it is true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError('timed out after %s s waiting for %s'
                                 % (timeout, what))
        time.sleep(0.02)


class Daemon(fixtures.Fixture):
    """``python -m mlaccel.cmd.taskd`` in a fresh directory, killed at cleanup.

    ``options`` are ``[mlaccel_taskd]`` settings; ``wait_ready`` waits
    until the socket answers a health request; ``env`` adds environment
    variables; ``launcher`` is a command line to run the daemon under.
    """

    def __init__(self, wait_ready=True, env=None, launcher=(), **options):
        super().__init__()
        self.env = dict(os.environ, **(env or {}))
        self.launcher = list(launcher)
        self.options = dict({'workers': 1, 'cancel_timeout': 1.0,
                             'grace_period': 5.0,
                             'allowed_tasks': SAMPLE + '*'}, **options)
        self.wait_ready = wait_ready

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.dir, 0o711)     # reachable by a foreign uid
        self.socket_path = os.path.join(self.dir, 'taskd.sock')
        self.address = 'unix:' + self.socket_path
        options = dict({'socket_path': self.socket_path,
                        'log_dir': os.path.join(self.dir, 'logs')},
                       **self.options)
        self.conf_path = os.path.join(self.dir, 'taskd.conf')
        with open(self.conf_path, 'w') as conf:
            conf.write('[mlaccel_taskd]\n')
            for name, value in options.items():
                if isinstance(value, (list, tuple)):
                    value = ','.join(value)
                conf.write('%s = %s\n' % (name, value))
        self.log_path = os.path.join(self.dir, 'daemon.log')
        with open(self.log_path, 'w') as log:
            self.process = subprocess.Popen(
                self.launcher + [sys.executable, '-m', 'mlaccel.cmd.taskd',
                                 '--config-file', self.conf_path],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.addCleanup(self._kill)
        if self.wait_ready:
            self.wait_until_ready()

    def _kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def wait_until_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError('taskd exited with %s:\n%s' % (
                    self.process.returncode, self.output()))
            try:
                with self.client() as conn:
                    return conn.health()
            except OSError:
                time.sleep(0.02)
        raise AssertionError('taskd not ready:\n%s' % self.output())

    def client(self, **kwargs):
        return client.TaskdClient(self.address, **kwargs)

    def output(self):
        with open(self.log_path) as log:
            return log.read()

    def terminate(self, timeout=30):
        """SIGTERM the daemon; return its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


def raw_exchange(address, payload, timeout=10):
    """Send raw bytes on a fresh connection; return the reply lines."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b''
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


class ReadyListener(fixtures.Fixture):
    """A real HTTP server collecting readiness POSTs with arrival times."""

    def _setUp(self):
        received = self.received = queue.Queue()
        signatures = self.signatures = queue.Queue()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers['Content-Length']))
                received.put((time.time(), self.path, json.loads(body)))
                signatures.put((body, self.headers.get(
                    'X-Mlaccel-Signature')))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                     Handler)
        self.port = self.httpd.server_address[1]
        thread = threading.Thread(target=self.httpd.serve_forever,
                                  daemon=True)
        thread.start()
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)

    def url(self, key):
        return 'http://127.0.0.1:%d/ready/%s' % (self.port, key)
