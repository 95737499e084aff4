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

"""Readiness of the all-in-one cloud's services, with real sockets."""

import http.server
import socket
import sys
import textwrap
import threading

import fixtures

from mlaccel_lab.testing.aio import layout
from mlaccel_lab.testing.aio import procs
from tests import testcase


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)

    def log_message(self, *args):
        pass


class HttpReadinessTest(testcase.TestCase):

    def test_any_http_answer_counts(self):
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _NotFound)
        self.addCleanup(server.server_close)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        self.assertTrue(procs.http_answers(server.server_address[1]))

    def test_a_listener_that_closes_without_answering_does_not(self):
        # What uwsgi's master does while (or after failing) loading the
        # application: the port is open, no HTTP answer comes.
        sock = socket.socket()
        self.addCleanup(sock.close)
        sock.bind(('127.0.0.1', 0))
        sock.listen(4)

        def close_each():
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                conn.close()
        threading.Thread(target=close_each, daemon=True).start()
        port = sock.getsockname()[1]
        self.assertTrue(procs.port_open(port))
        self.assertFalse(procs.http_answers(port))

    def test_a_server_that_dies_before_answering_fails_fast(self):
        """A real process listens, never answers, and exits.

        The wait fails at once with the end of its log, not at its timeout.
        """
        lay = layout.Layout(self.useFixture(fixtures.TempDir()).path)
        sock = socket.socket()
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
        sock.close()
        script = textwrap.dedent('''
            import socket, sys, time
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(('127.0.0.1', %d))
            s.listen(4)
            print('no app loaded. GAME OVER', flush=True)
            time.sleep(1)
            sys.exit(1)
        ''' % port)
        procs.start(lay, 'api', [sys.executable, '-c', script])
        self.addCleanup(procs.stop, lay, 'api', 5)
        error = self.assertRaises(procs.ServiceError, procs.wait_port, lay,
                                  'api', port, 60, probe=procs.http_answers)
        self.assertIn('api exited before listening', str(error))
        self.assertIn('GAME OVER', str(error))
