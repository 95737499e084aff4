"""The readiness listener over real HTTP on a real loopback socket."""

import http.client
import json
import subprocess
import sys
import threading
import time

import testtools

from mlaccel.launcher import readiness
from mlaccel.taskd import readiness as taskd_readiness


class ListenerTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.listener = readiness.ReadinessListener('127.0.0.1', 0)
        self.listener.start()
        self.addCleanup(self.listener.stop)
        self.received = []
        self.got = threading.Event()

    def _callback(self, ready):
        self.received.append(ready)
        self.got.set()

    def _post(self, path, body, headers=None):
        conn = http.client.HTTPConnection('127.0.0.1', self.listener.port,
                                          timeout=5)
        self.addCleanup(conn.close)
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        conn.request('POST', path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())

    def _body(self, key, **changes):
        body = {'v': 1, 'key': key, 'address': 'tcp:127.0.0.1:7070',
                'ready_at': time.time(), 'preloaded': ['json'], 'pid': 42}
        body.update(changes)
        return body

    def test_push_by_taskd_reaches_callback(self):
        key = readiness.new_key()
        self.listener.expect(key, self._callback)
        url = self.listener.url_for(key)
        self.assertEqual('http://127.0.0.1:%d/ready/%s'
                         % (self.listener.port, key), url)
        body = taskd_readiness.notice(url, 'tcp:0.0.0.0:7070', time.time(),
                                      ['json'], 1234)
        self.assertTrue(taskd_readiness.push(url, body))
        self.assertTrue(self.got.wait(5))
        ready = self.received[0]
        self.assertEqual(key, ready.key)
        # Wildcard address resolved to where the push came from.
        self.assertEqual('tcp:127.0.0.1:7070', ready.address)
        self.assertEqual(1234, ready.pid)
        self.assertEqual(('json',), ready.preloaded)
        self.assertGreaterEqual(ready.received_at, ready.ready_at)

    def test_retried_push_delivered_once(self):
        key = readiness.new_key()
        self.listener.expect(key, self._callback)
        for _ in range(3):
            status, reply = self._post('/ready/' + key, self._body(key))
            self.assertEqual((200, {'ok': True}), (status, reply))
        self.assertEqual(1, len(self.received))

    def test_unknown_key_refused(self):
        status, reply = self._post('/ready/nope', self._body('nope'))
        self.assertEqual(404, status)
        self.assertFalse(reply['ok'])

    def test_bad_bodies_refused_and_listener_keeps_serving(self):
        key = readiness.new_key()
        self.listener.expect(key, self._callback)
        path = '/ready/' + key
        bad = [b'not json', b'[1, 2]', b'\xff\xfe',
               self._body(key, v=2), self._body('other'),
               self._body(key, ready_at='soon'),
               self._body(key, ready_at=True),
               self._body(key, address='http://x'),
               self._body(key, address='tcp:1.2.3.4:99999'),
               self._body(key, address=None),
               self._body(key, preloaded='torch'),
               self._body(key, pid='1')]
        for body in bad:
            status, reply = self._post(path, body)
            self.assertEqual(400, status, body)
            self.assertFalse(reply['ok'])
        status, _ = self._post(path, b'x' * (readiness.MAX_BODY_BYTES + 1))
        self.assertEqual(413, status)
        self.assertEqual([], self.received)
        status, _ = self._post(path, self._body(key))
        self.assertEqual(200, status)
        self.assertEqual(1, len(self.received))

    def test_other_paths_and_methods(self):
        status, _ = self._post('/other', b'{}')
        self.assertEqual(404, status)
        conn = http.client.HTTPConnection('127.0.0.1', self.listener.port,
                                          timeout=5)
        self.addCleanup(conn.close)
        conn.request('GET', '/ready/x')
        self.assertEqual(405, conn.getresponse().status)

    def test_forget_stops_delivery(self):
        key = readiness.new_key()
        self.listener.expect(key, self._callback)
        self.listener.forget(key)
        status, _ = self._post('/ready/' + key, self._body(key))
        self.assertEqual(404, status)

    def test_concurrent_pushes(self):
        keys = [readiness.new_key() for _ in range(20)]
        for key in keys:
            self.listener.expect(key, self._callback)
        threads = [threading.Thread(target=self._post,
                                    args=('/ready/' + key, self._body(key)))
                   for key in keys]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(sorted(keys), sorted(r.key for r in self.received))


class ResolveAddressTest(testtools.TestCase):

    def test_forms(self):
        resolve = readiness.resolve_address
        self.assertEqual('tcp:10.0.0.5:7070',
                         resolve('tcp:0.0.0.0:7070', '10.0.0.5'))
        self.assertEqual('tcp:[fd00::5]:7070',
                         resolve('tcp:[::]:7070', 'fd00::5'))
        self.assertEqual('tcp:[fd00::6]:1', resolve('tcp:fd00::6:1', 'x'))
        self.assertEqual('tcp:vm-1:7070', resolve('tcp:vm-1:7070', 'x'))
        self.assertEqual('unix:/run/t.sock', resolve('unix:/run/t.sock', 'x'))
        for bad in ('tcp:host', 'tcp:host:0', 'udp:h:1', 'unix:', 7):
            self.assertRaises(readiness.BadPush, resolve, bad, 'x')

    def test_wildcard_needs_advertised_host(self):
        self.assertRaises(ValueError, readiness.ReadinessListener, '0.0.0.0')
        listener = readiness.ReadinessListener('0.0.0.0', 0, 'fd00::1')
        with listener:
            self.assertTrue(listener.url_for('k').startswith(
                'http://[fd00::1]:'))


class EventletTest(testtools.TestCase):
    """Pushes arrive under eventlet monkey patching done late.

    The child imports http.server before patching, as a process does that
    imports Nova (which patches) after the launcher.
    """

    def test_push_under_late_monkey_patching(self):
        script = '\n'.join([
            'import http.server, socketserver',
            'import eventlet',
            'eventlet.monkey_patch()',
            'import threading, time',
            'from mlaccel.launcher import readiness',
            'from mlaccel.taskd import readiness as taskd_readiness',
            'got = threading.Event()',
            "listener = readiness.ReadinessListener('127.0.0.1', 0)",
            'listener.start()',
            'key = readiness.new_key()',
            'listener.expect(key, lambda ready: got.set())',
            'url = listener.url_for(key)',
            "body = taskd_readiness.notice(url, 'tcp:127.0.0.1:1',",
            '                              time.time(), [], 1)',
            'assert taskd_readiness.push(url, body, attempts=2)',
            'assert got.wait(10)',
            'listener.stop()',
            "print('delivered')"])
        result = subprocess.run([sys.executable, '-c', script],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('delivered', result.stdout)
