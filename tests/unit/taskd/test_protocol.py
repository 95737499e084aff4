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

"""The JSON-lines protocol: parser, line splitter, fuzzed input."""

import io
import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from mlaccel.taskd import protocol

from tests import testcase

TASK = 'a' * 32
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) |
    st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


class TestParseRequest(testcase.TestCase):

    def _code(self, line, request_id=None):
        err = self.assertRaises(protocol.ProtocolError,
                                protocol.parse_request, line)
        self.assertEqual(request_id, err.request_id)
        return err.code

    def test_valid_requests(self):
        for op, fields in [('health', {}),
                           ('submit', {'entry': 'a.b:c', 'args': {'x': 1},
                                       'env': {'A_1': 'v'}, 'threads': 2,
                                       'seed': 3, 'cwd': '/', 'mode': 'worker',
                                       'limits': {'nofile': 10}}),
                           ('status', {'task': TASK}),
                           ('wait', {'task': TASK, 'timeout': 1.5}),
                           ('cancel', {'task': TASK}),
                           ('logs', {'task': TASK, 'tail': 3})]:
            message = protocol.request(op, 'r1', **fields)
            self.assertEqual(message, protocol.parse_request(
                protocol.encode(message)))

    def test_errors_carry_code_and_request_id(self):
        self.assertEqual(protocol.MALFORMED, self._code(b'{"v": 1'))
        self.assertEqual(protocol.MALFORMED, self._code(b'[1, 2]'))
        self.assertEqual(protocol.MALFORMED, self._code(b'\xff\xfe'))
        self.assertEqual(protocol.UNSUPPORTED,
                         self._code(b'{"v": 2, "op": "health", "id": 7}', 7))
        self.assertEqual(protocol.UNKNOWN_OP,
                         self._code(b'{"v": 1, "op": "reboot", "id": "x"}',
                                    'x'))
        for bad in [{'op': 'submit'},
                    {'op': 'submit', 'entry': 'os:system; rm'},
                    {'op': 'submit', 'entry': 'a:b', 'threads': 0},
                    {'op': 'submit', 'entry': 'a:b', 'mode': 'thread'},
                    {'op': 'submit', 'entry': 'a:b', 'env': {'A': 1}},
                    {'op': 'status', 'task': '../../etc/passwd'},
                    {'op': 'health', 'extra': 1},
                    {'op': 'wait', 'task': TASK, 'timeout': -1}]:
            line = json.dumps(dict(bad, v=1, id=9)).encode()
            self.assertEqual(protocol.INVALID, self._code(line, 9), bad)

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=512))
    def test_fuzzed_bytes_never_crash_the_parser(self, line):
        try:
            self.assertIsInstance(protocol.parse_request(line), dict)
        except protocol.ProtocolError as exc:
            self.assertIn(exc.code, (protocol.MALFORMED, protocol.UNSUPPORTED,
                                     protocol.UNKNOWN_OP, protocol.INVALID))

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.sampled_from(
        ['v', 'op', 'id', 'task', 'entry', 'args', 'env', 'threads',
         'seed', 'cwd', 'mode', 'limits', 'timeout', 'tail', 'token']),
        JSON | st.sampled_from([1, 'submit', 'wait', TASK, 'a:b']),
        max_size=8))
    def test_fuzzed_objects_are_accepted_or_refused(self, message):
        try:
            request = protocol.parse_request(json.dumps(message))
        except protocol.ProtocolError as exc:
            self.assertIsInstance(exc.message, str)
        else:
            self.assertEqual(protocol.VERSION, request['v'])
            self.assertIn(request['op'], protocol.OPS)


class TestIterLines(testcase.TestCase):

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.binary(max_size=40).map(
        lambda b: b.replace(b'\n', b'')), max_size=10),
        st.integers(min_value=1, max_value=16))
    def test_any_chunking_gives_the_same_lines(self, lines, chunk):
        stream = io.BytesIO(b''.join(line + b'\n' for line in lines))
        self.assertEqual(lines, list(protocol.iter_lines(stream.read, 64,
                                                         chunk=chunk)))

    def test_long_lines_are_skipped_with_bounded_memory(self):
        data = b'ok1\n' + b'x' * 1000 + b'\nok2\n' + b'y' * 1000
        for chunk in (3, 64, 4096):
            out = list(protocol.iter_lines(io.BytesIO(data).read, 100,
                                           chunk=chunk))
            self.assertEqual([b'ok1', protocol.TOO_LONG, b'ok2',
                              protocol.TOO_LONG], out, chunk)

    def test_last_line_without_newline(self):
        self.assertEqual([b'a', b'b'], list(protocol.iter_lines(
            io.BytesIO(b'a\nb').read, 10)))

    def test_tcp_address(self):
        self.assertEqual(('::1', 80), protocol.parse_tcp_address('[::1]:80'))
        self.assertEqual('tcp:[::1]:80',
                         protocol.format_tcp_address('::1', 80))
        for bad in ('host', 'host:port', 'h:99999'):
            self.assertRaises(ValueError, protocol.parse_tcp_address, bad)


class TestTaskSpec(testcase.TestCase):

    def test_round_trip_through_a_request(self):
        spec = protocol.TaskSpec('clip', {'steps': 3}, env={'A': 'b'},
                                 threads=2, seed=0, cwd='/', mode='worker',
                                 limits={'nofile': 10})
        line = protocol.encode(protocol.request('submit', 1,
                                                **spec.to_wire()))
        self.assertEqual(spec, protocol.TaskSpec.from_wire(
            protocol.parse_request(line)))

    def test_defaults_and_copies(self):
        args = {'x': 1}
        spec = protocol.TaskSpec('a.b:c', args)
        args['x'] = 2
        self.assertEqual({'x': 1}, spec.args)
        self.assertEqual({'entry': 'a.b:c', 'args': {'x': 1}, 'env': {},
                          'mode': 'fork'}, spec.to_wire())

    def test_schema_refuses_bad_fields(self):
        for bad in [{'entry': 'os:system; rm'}, {'entry': 'a', 'threads': 0},
                    {'entry': 'a', 'mode': 'thread'},
                    {'entry': 'a', 'env': {'A': 1}},
                    {'entry': 'a', 'limits': {'nofile': -1}}]:
            self.assertRaises(ValueError, protocol.TaskSpec, **bad)
