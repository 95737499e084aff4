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

"""The readiness listener over real HTTPS on a real loopback socket.

The attacks here are the ones a guest or a network peer can make: a push
for another VM's key, unsigned or signed with another token, over plain
HTTP, a request trickled in one byte at a time, deeply nested JSON, more
connections than the listener serves.
"""

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

import fixtures

from mlaccel.launcher import ready_listener
from mlaccel import readiness as notices
from mlaccel.taskd import ready_push
from mlaccel import tls

from tests import testcase
from tests.unit import tls_fixtures

TOKEN = 'token-of-vm-a-0123456789'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
OTHER_TOKEN = 'token-of-vm-b-0123456789'


class ListenerBase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger())
        self.listener = self._listener()
        self.received = []
        self.got = threading.Event()

    def _listener(self, **kwargs):
        listener = ready_listener.ReadinessListener('127.0.0.1', 0, **kwargs)
        listener.start()
        self.addCleanup(listener.stop)
        cafile = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'ready-ca.pem')
        with open(cafile, 'w') as stream:
            stream.write(listener.cert_pem)
        self.cafile = cafile
        return listener

    def _callback(self, ready):
        self.received.append(ready)
        self.got.set()

    def _expect(self, token=TOKEN):
        key = ready_listener.new_key()
        self.listener.expect(key, self._callback, token)
        return key

    def _connection(self):
        return http.client.HTTPSConnection(
            '127.0.0.1', self.listener.port, timeout=5,
            context=tls.client_context(pinned_cert_pem=self.listener.cert_pem))

    def _post(self, path, body, token=TOKEN, headers=None):
        conn = self._connection()
        self.addCleanup(conn.close)
        if not isinstance(body, bytes):
            body = notices.encode(body)
        headers = dict(headers or {})
        if token:
            headers[notices.SIGNATURE_HEADER] = notices.sign(token, body)
        conn.request('POST', path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())

    def _body(self, key, **changes):
        body = {'v': notices.VERSION, 'key': key,
                'address': 'tcp:127.0.0.1:7070', 'ready_at': time.time(),
                'preloaded': ['json'], 'pid': 42}
        body.update(changes)
        return body

    def _assert_serving(self):
        key = self._expect()
        status, reply = self._post('/ready/' + key, self._body(key))
        self.assertEqual((200, {'ok': True}), (status, reply))


class ListenerTest(ListenerBase):

    def test_push_by_taskd_reaches_callback(self):
        key = self._expect()
        url = self.listener.url_for(key)
        self.assertEqual('https://127.0.0.1:%d/ready/%s'
                         % (self.listener.port, key), url)
        body = notices.notice(url, 'tcp:0.0.0.0:7070', time.time(),
                              ['json'], 1234)
        self.assertTrue(ready_push.push(url, body, token=TOKEN,
                                        cafile=self.cafile))
        self.assertTrue(self.got.wait(5))
        ready = self.received[0]
        self.assertEqual(key, ready.key)
        # Wildcard address resolved to where the push came from.
        self.assertEqual('tcp:127.0.0.1:7070', ready.address)
        self.assertEqual(1234, ready.pid)
        self.assertEqual(('json',), ready.preloaded)
        self.assertGreaterEqual(ready.received_at, ready.ready_at)

    def test_retried_push_delivered_once(self):
        key = self._expect()
        for _ in range(3):
            status, reply = self._post('/ready/' + key, self._body(key))
            self.assertEqual((200, {'ok': True}), (status, reply))
        self.assertEqual(1, len(self.received))

    def test_unknown_key_refused(self):
        status, reply = self._post('/ready/nope', self._body('nope'))
        self.assertEqual(404, status)
        self.assertFalse(reply['ok'])

    def test_push_must_be_signed_by_the_vm_it_names(self):
        # The attack: a third party (or another VM) pushes first for a
        # VM's key, naming its own taskd, even a Unix socket of this host.
        key = self._expect()
        other = self._expect(OTHER_TOKEN)
        path = '/ready/' + key
        forged = self._body(key, address='unix:/run/attacker.sock')
        for token, headers in ((None, {}),
                               (None, {notices.SIGNATURE_HEADER: 'ab' * 32}),
                               (None, {notices.SIGNATURE_HEADER: 'é'}),
                               (OTHER_TOKEN, {})):
            status, reply = self._post(path, forged, token=token,
                                       headers=headers)
            self.assertEqual(401, status, (token, headers))
            self.assertIn(notices.SIGNATURE_HEADER, reply['error'])
        self.assertIn('Rejected readiness push from 127.0.0.1: missing or '
                      'wrong X-Mlaccel-Signature', self.logs.output)
        # Signed by VM b for its own key, but sent to VM a's URL.
        status, _ = self._post(path, self._body(other), token=OTHER_TOKEN)
        self.assertEqual(401, status)
        self.assertEqual([], self.received)
        status, _ = self._post(path, self._body(key))
        self.assertEqual(200, status)
        self.assertEqual('tcp:127.0.0.1:7070', self.received[0].address)

    def test_plain_http_is_refused(self):
        key = self._expect()
        body = notices.encode(self._body(key))
        conn = http.client.HTTPConnection('127.0.0.1', self.listener.port,
                                          timeout=5)
        self.addCleanup(conn.close)
        self.assertRaises((OSError, http.client.HTTPException), lambda: (
            conn.request('POST', '/ready/' + key, body=body, headers={
                notices.SIGNATURE_HEADER: notices.sign(TOKEN, body)}),
            conn.getresponse().read()))
        self.assertEqual([], self.received)
        self._assert_serving()

    def test_push_to_an_impostor_listener_fails(self):
        # A daemon pins the launcher's certificate: another listener (with
        # a certificate of its own) never gets the notice.
        key = self._expect()
        impostor = ready_listener.ReadinessListener('127.0.0.1', 0).start()
        self.addCleanup(impostor.stop)
        impostor.expect(key, self._callback, TOKEN)
        url = impostor.url_for(key)
        self.assertFalse(ready_push.push(
            url, notices.notice(url, 'tcp:127.0.0.1:1', time.time(), [], 1),
            token=TOKEN, cafile=self.cafile, attempts=3))
        self.assertEqual([], self.received)

    def test_operator_certificate_pins_the_listener_not_its_ca(self):
        # The operator's certificate for the launcher, with its chain: the
        # daemon gets that file and must trust the launcher alone, not any
        # holder of another certificate from the same CA.
        ca = tls_fixtures.OperatorCA()
        tmp = self.useFixture(fixtures.TempDir()).path
        cert, key = ca.write(tmp, ca.issue('launcher'), 'launcher')
        self.listener.stop()
        self.listener = self._listener(cert_file=cert, key_file=key)
        cert, key = ca.write(tmp, ca.issue('impostor'), 'impostor')
        impostor = ready_listener.ReadinessListener(
            '127.0.0.1', 0, cert_file=cert, key_file=key).start()
        self.addCleanup(impostor.stop)
        key = self._expect()
        impostor.expect(key, self._callback, TOKEN)
        for listener, accepted in ((impostor, False), (self.listener, True)):
            url = listener.url_for(key)
            self.assertEqual(accepted, ready_push.push(
                url, notices.notice(url, 'tcp:127.0.0.1:1', time.time(), [],
                                    1), token=TOKEN, cafile=self.cafile,
                attempts=1), url)
        self.assertEqual(1, len(self.received))
        self.assertIn('not the launcher the certificate names',
                      self.logs.output)

    def test_bad_bodies_refused_and_listener_keeps_serving(self):
        key = self._expect()
        path = '/ready/' + key
        bad = [b'not json', b'[1, 2]', b'\xff\xfe',
               b'[' * 5000 + b']' * 5000,
               b'{"a": ' * 2000 + b'1' + b'}' * 2000,
               self._body(key, v=1), self._body('other'),
               self._body(key, ready_at='soon'),
               self._body(key, ready_at=True),
               self._body(key, address='http://x'),
               self._body(key, address='tcp:1.2.3.4:99999'),
               self._body(key, address=None),
               self._body(key, preloaded='torch'),
               self._body(key, preloaded=[[[['torch']]]]),
               self._body(key, pid='1'), self._body(key, extra=1)]
        for body in bad:
            status, reply = self._post(path, body)
            self.assertEqual(400, status, repr(body)[:80])
            self.assertFalse(reply['ok'])
            self.assertLess(len(reply['error']), 400)
        status, _ = self._post(
            path, b'x' * (ready_listener.MAX_BODY_BYTES + 1))
        self.assertEqual(413, status)
        self.assertEqual([], self.received)
        status, _ = self._post(path, self._body(key))
        self.assertEqual(200, status)
        self.assertEqual(1, len(self.received))

    def test_other_paths_methods_and_garbage(self):
        status, _ = self._post('/other', b'{}')
        self.assertEqual(404, status)
        conn = self._connection()
        self.addCleanup(conn.close)
        conn.request('GET', '/ready/x')
        self.assertEqual(405, conn.getresponse().status)
        for garbage in (b'\r\n\r\n', b'HELLO\r\n\r\n',
                        b'POST /ready/x SPDY/3\r\n\r\n',
                        b'POST /ready/x HTTP/1.1\r\n' + b'X: y\r\n' * 200
                        + b'\r\n'):
            reply = self._raw(garbage)
            self.assertTrue(reply.startswith(b'HTTP/1.1 4'), reply)
        self._assert_serving()

    def _tls_socket(self):
        sock = socket.create_connection(('127.0.0.1', self.listener.port),
                                        timeout=5)
        self.addCleanup(sock.close)
        return tls.client_context(
            pinned_cert_pem=self.listener.cert_pem).wrap_socket(sock)

    def _raw(self, data):
        sock = self._tls_socket()
        sock.sendall(data)
        reply = b''
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return reply
            reply += chunk

    def test_forget_stops_delivery(self):
        key = self._expect()
        self.listener.forget(key)
        status, _ = self._post('/ready/' + key, self._body(key))
        self.assertEqual(404, status)

    def test_concurrent_pushes(self):
        # 20 daemons at once from one address (VMs behind one NAT): beyond
        # max_per_peer at a time, a push is cut off and retried.
        keys = [self._expect() for _ in range(20)]
        pushed = []

        def push(key):
            url = self.listener.url_for(key)
            pushed.append(ready_push.push(
                url, self._body(key), token=TOKEN, cafile=self.cafile))
        threads = [threading.Thread(target=push, args=(key,))
                   for key in keys]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([True] * 20, pushed)
        self.assertEqual(sorted(keys), sorted(r.key for r in self.received))

    def test_expect_needs_a_token(self):
        self.assertRaises(ValueError, self.listener.expect, 'k',
                          self._callback, None)


class HostileClientTest(ListenerBase):
    """Peers that try to hold the listener or make it fail."""

    def _listener(self, **kwargs):
        kwargs.setdefault('request_timeout', 1.0)
        return super()._listener(**kwargs)

    def _trickle(self, sock, data, pause=0.1):
        """Send ``data`` a byte at a time until the listener hangs up.

        Returns how many bytes went out before it closed the connection,
        None if it never did.
        """
        for sent, byte in enumerate(data):
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return sent
            time.sleep(pause)
        return None

    def test_slow_header_is_cut_off(self):
        sock = self._tls_socket()
        request = b'POST /ready/key HTTP/1.1\r\n' + b'X-Slow: ' + b'y' * 200
        # 230 bytes at 10 per second would take 23 s: far beyond the
        # request timeout of the listener (1 s). It must close first.
        self._trickle(sock, request)
        reply = b''
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except OSError:
            pass
        self.assertIn(b' 408 ', reply)
        self._assert_serving()

    def test_slow_tls_handshake_is_cut_off(self):
        sock = socket.create_connection(('127.0.0.1', self.listener.port),
                                        timeout=5)
        self.addCleanup(sock.close)
        # A real ClientHello, a byte at a time: at 10 bytes a second it
        # would take far longer than the listener's request timeout.
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        hello = tls.client_context(
            pinned_cert_pem=self.listener.cert_pem).wrap_bio(
                incoming, outgoing)
        self.assertRaises(ssl.SSLWantReadError, hello.do_handshake)
        data = outgoing.read()
        self.assertGreater(len(data), 100)
        self.assertIsNotNone(self._trickle(sock, data),
                             'the listener never closed the connection')
        self._assert_serving()

    def _tls_socket(self):
        return ListenerTest._tls_socket(self)

    def _assert_closed_at_once(self):
        """A new connection is closed (or reset) before it sends a byte."""
        extra = socket.create_connection(('127.0.0.1', self.listener.port),
                                         timeout=5)
        self.addCleanup(extra.close)
        try:
            self.assertEqual(b'', extra.recv(1))
        except ConnectionResetError:
            pass

    def test_connections_beyond_the_limit_are_closed(self):
        self.listener.stop()
        self.listener = self._listener(max_connections=2,
                                       request_timeout=30.0)
        held = [self._tls_socket() for _ in range(2)]
        self._assert_closed_at_once()
        for sock in held:
            sock.close()
        # The slots come back as the held connections end.
        for _ in range(50):
            try:
                self._assert_serving()
                break
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)
        else:
            self._assert_serving()

    def test_one_peer_cannot_take_every_slot(self):
        self.listener.stop()
        self.listener = self._listener(max_per_peer=2, request_timeout=30.0)
        held = [self._tls_socket() for _ in range(2)]
        self._assert_closed_at_once()
        # Another address (of this host, here) is another peer: served.
        key = self._expect()
        body = notices.encode(self._body(key))
        conn = http.client.HTTPSConnection(
            '127.0.0.1', self.listener.port, timeout=5,
            source_address=('127.0.0.2', 0),
            context=tls.client_context(pinned_cert_pem=self.listener.cert_pem))
        self.addCleanup(conn.close)
        conn.request('POST', '/ready/' + key, body=body, headers={
            notices.SIGNATURE_HEADER: notices.sign(TOKEN, body)})
        self.assertEqual(200, conn.getresponse().status)
        self.assertEqual('127.0.0.2', self.received[0].peer)
        for sock in held:
            sock.close()

    def test_accept_loop_survives_a_thread_that_cannot_start(self):
        # Running out of threads cannot be provoked safely in a test: the
        # first thread start fails the way it does then.
        failed = []
        real_start = threading.Thread.start

        def start(thread):
            if not failed:
                failed.append(thread)
                raise RuntimeError("can't start new thread")
            return real_start(thread)
        self.useFixture(fixtures.MonkeyPatch('threading.Thread.start', start))
        sock = socket.create_connection(('127.0.0.1', self.listener.port),
                                        timeout=5)
        self.addCleanup(sock.close)
        try:
            self.assertEqual(b'', sock.recv(1))
        except ConnectionResetError:
            pass
        self.assertEqual(1, len(failed))
        self._assert_serving()


class ResolveAddressTest(testcase.TestCase):

    def test_forms(self):
        resolve = ready_listener.resolve_address
        self.assertEqual('tcp:10.0.0.5:7070',
                         resolve('tcp:0.0.0.0:7070', '10.0.0.5'))
        self.assertEqual('tcp:[fd00::5]:7070',
                         resolve('tcp:[::]:7070', 'fd00::5'))
        self.assertEqual('tcp:[fd00::6]:1', resolve('tcp:fd00::6:1', 'x'))
        self.assertEqual('tcp:vm-1:7070', resolve('tcp:vm-1:7070', 'x'))
        self.assertEqual('unix:/run/t.sock', resolve('unix:/run/t.sock', 'x'))
        for bad in ('tcp:host', 'tcp:host:0', 'udp:h:1', 'unix:', 7):
            self.assertRaises(ready_listener.BadPush, resolve, bad, 'x')

    def test_wildcard_needs_advertised_host(self):
        self.assertRaises(ValueError, ready_listener.ReadinessListener,
                          '0.0.0.0')
        listener = ready_listener.ReadinessListener('0.0.0.0', 0, 'fd00::1')
        with listener:
            self.assertTrue(listener.url_for('k').startswith(
                'https://[fd00::1]:'))

    def test_operator_certificate(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        identity = tls.new_identity('launcher.example.org')
        cert, key = os.path.join(tmp, 'c.pem'), os.path.join(tmp, 'k.pem')
        identity.write(cert, key)
        with ready_listener.ReadinessListener('127.0.0.1', 0, cert_file=cert,
                                              key_file=key) as listener:
            self.assertEqual(identity.cert_pem, listener.cert_pem)
        self.assertRaises(ValueError, ready_listener.ReadinessListener,
                          '127.0.0.1', cert_file=cert)


class DaemonAddressTest(testcase.TestCase):
    """Only Nova's addresses of the VM's server are ever reached."""

    NOVA = {'private': [
        {'addr': '10.0.0.5', 'version': 4, 'OS-EXT-IPS:type': 'fixed'},
        {'addr': 'fd00::5', 'version': 6, 'OS-EXT-IPS:type': 'fixed'},
        {'addr': '203.0.113.5', 'version': 4,
         'OS-EXT-IPS:type': 'floating'}]}

    def _choose(self, address, peer='10.0.0.5', addresses=NOVA):
        ready = ready_listener.Readiness(key='k', address=address,
                                         ready_at=1.0, received_at=1.0,
                                         peer=peer)
        return ready_listener.daemon_address(
            ready, ready_listener.server_addresses(addresses))

    def test_server_addresses_floating_first(self):
        self.assertEqual(
            ['203.0.113.5', '10.0.0.5', 'fd00::5'],
            [str(ip) for ip in ready_listener.server_addresses(self.NOVA)])
        self.assertEqual((), ready_listener.server_addresses(None))
        self.assertEqual((), ready_listener.server_addresses(
            {'n': [{'addr': 'not-an-ip'}, {}]}))

    def test_listed_addresses_are_kept(self):
        for address in ('tcp:10.0.0.5:7070', 'tcp:[fd00::5]:7070',
                        'tcp:203.0.113.5:7070'):
            self.assertEqual(address, self._choose(address))
        # The push's source, as a dual-stack listener sees an IPv4 peer.
        self.assertEqual('tcp:10.0.0.5:7070', self._choose(
            ready_listener.resolve_address('tcp:0.0.0.0:7070',
                                           '::ffff:10.0.0.5'),
            peer='::ffff:10.0.0.5'))

    def test_other_hosts_are_never_reached(self):
        # Link-local (the metadata service), loopback, multicast, the
        # unspecified address, a sibling's or any other host, a host name:
        # the push's source is reached instead when Nova lists it...
        for address in ('tcp:169.254.169.254:80', 'tcp:[fe80::1]:80',
                        'tcp:127.0.0.1:6379', 'tcp:[::1]:22',
                        'tcp:224.0.0.1:80', 'tcp:[::]:80', 'tcp:0.0.0.0:80',
                        'tcp:10.0.0.6:7070', 'tcp:metadata.internal:80',
                        'tcp:[::ffff:127.0.0.1]:80'):
            self.assertEqual('tcp:10.0.0.5:' + address.rpartition(':')[2],
                             self._choose(address), address)
        # ... and Nova's first address (floating) when it does not.
        self.assertEqual('tcp:203.0.113.5:7070', self._choose(
            'tcp:169.254.169.254:7070', peer='192.0.2.1'))

    def test_special_addresses_nova_lists_are_reached(self):
        nova = {'n': [{'addr': '127.0.0.5'}, {'addr': 'fe80::5'}]}
        for address in ('tcp:127.0.0.5:7070', 'tcp:[fe80::5]:7070'):
            self.assertEqual(address, self._choose(address, '127.0.0.5',
                                                   nova))

    def test_a_server_without_addresses(self):
        # Only a guest on the launcher's own host (the test cloud's) can
        # push for it: it is reached where the push came from.
        self.assertEqual('tcp:127.0.0.1:4000', self._choose(
            'tcp:127.0.0.1:4000', peer='127.0.0.1', addresses={}))
        self.assertEqual('tcp:127.0.0.1:4000', self._choose(
            'tcp:127.0.0.2:4000', peer='127.0.0.1', addresses={}))
        self.assertEqual('tcp:[::1]:4000', self._choose(
            'tcp:[::]:4000', peer='::1', addresses={}))
        for peer in ('10.0.0.5', '169.254.0.1', 'fe80::1'):
            self.assertIsNone(self._choose('tcp:%s:4000' % peer, peer,
                                           addresses={}))


class EventletTest(testcase.TestCase):
    """Pushes arrive under eventlet monkey patching done late.

    The child imports http.server before patching, as a process does that
    imports Nova (which patches) after the launcher.
    """

    def test_push_under_late_monkey_patching(self):
        script = '\n'.join([
            'import http.server, socketserver, sys',
            'import eventlet',
            'eventlet.monkey_patch()',
            'import threading, time',
            'from mlaccel import readiness as notices',
            'from mlaccel.launcher import ready_listener',
            'from mlaccel.taskd import ready_push',
            'got = threading.Event()',
            "listener = ready_listener.ReadinessListener('127.0.0.1', 0)",
            'listener.start()',
            "open(sys.argv[1], 'w').write(listener.cert_pem)",
            'key = ready_listener.new_key()',
            "listener.expect(key, lambda ready: got.set(), 'tok' * 8)",
            'url = listener.url_for(key)',
            "body = notices.notice(url, 'tcp:127.0.0.1:1',",
            '                      time.time(), [], 1)',
            "assert ready_push.push(url, body, token='tok' * 8,",
            '                            cafile=sys.argv[1], attempts=2)',
            'assert got.wait(10)',
            'listener.stop()',
            "print('delivered')"])
        cafile = os.path.join(self.useFixture(fixtures.TempDir()).path,
                              'ca.pem')
        result = subprocess.run([sys.executable, '-c', script, cafile],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('delivered', result.stdout)

    def test_hostile_clients_under_monkey_patching(self):
        # Eventlet's TLS sockets restart their timeout at every wait: the
        # deadlines must hold there too.
        script = '\n'.join([
            'import eventlet',
            'eventlet.monkey_patch()',
            'import sys',
            'from testtools import run',
            'run.main([sys.argv[0], "tests.unit.launcher.test_ready_listener.'
            'HostileClientTest"], sys.stdout)'])
        result = subprocess.run(
            [sys.executable, '-c', script], capture_output=True, text=True,
            timeout=300, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
        self.assertEqual(0, result.returncode, result.stdout[-3000:])
        self.assertIn('OK', result.stdout)
