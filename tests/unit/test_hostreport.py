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

"""The host report schema: round trips, and every kind of bad input."""

import json
import math

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from mlaccel import hostreport

from tests import testcase

FUZZ = settings(max_examples=150, deadline=None)

names = st.text(min_size=1, max_size=40)
reports = st.builds(
    hostreport.HostReport,
    host=names,
    timestamp=st.floats(0, 1e10, allow_nan=False),
    cached_images=st.frozensets(names, max_size=20),
    cache_free_bytes=st.integers(0, 2 ** 63),
    fetch_bandwidth=st.floats(0, 1e15, allow_nan=False),
    builds_in_flight=st.integers(0, 2 ** 31),
    build_throughput=st.floats(0, 1e15, allow_nan=False),
    build_limit=st.integers(0, 2 ** 31),
    agent_version=st.text(max_size=64),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=20), children, max_size=5),
    max_leaves=15)


DELETE = object()


def valid(**changes):
    """A valid report as a dict, with ``changes`` applied (or DELETE-d)."""
    data = {'version': hostreport.VERSION, 'host': 'cmp1',
            'timestamp': 1700000000.5,
            'cached_images': ['img-a', 'img-b'], 'cache_free_bytes': 10,
            'fetch_bandwidth': 1e8, 'builds_in_flight': 2,
            'build_throughput': 0.5, 'build_limit': 4,
            'agent_version': '0.1'}
    for key, value in changes.items():
        if value is DELETE:
            data.pop(key)
        else:
            data[key] = value
    return data


def dumps(data):
    return json.dumps(data).encode()


class TestRoundTrip(testcase.TestCase):

    @FUZZ
    @given(reports)
    def test_encode_then_parse_gives_the_report_back(self, report):
        self.assertEqual(report, hostreport.parse(hostreport.encode(report)))

    def test_encoding_is_compact_sorted_and_versioned(self):
        raw = hostreport.encode(hostreport.HostReport(
            'cmp1', 5.0, cached_images=frozenset({'b', 'a'})))
        data = json.loads(raw)
        self.assertEqual('%d.%d' % (hostreport.MAJOR, hostreport.MINOR),
                         data['version'])
        self.assertEqual(['a', 'b'], data['cached_images'])
        self.assertNotIn(b' ', raw)

    def test_optional_fields_take_their_defaults(self):
        report = hostreport.parse(dumps(
            {'version': '1.0', 'host': 'cmp1', 'timestamp': 7}))
        self.assertEqual(hostreport.HostReport('cmp1', 7.0), report)
        self.assertIsInstance(report.timestamp, float)

    def test_newer_minor_version_is_read_and_its_new_fields_ignored(self):
        report = hostreport.parse(dumps(valid(version='1.9', gpu_slots=3)))
        self.assertEqual('cmp1', report.host)
        self.assertEqual(frozenset({'img-a', 'img-b'}), report.cached_images)

    def test_str_input_is_accepted(self):
        self.assertEqual('cmp1', hostreport.parse(json.dumps(valid())).host)

    def test_age(self):
        report = hostreport.HostReport('cmp1', 100.0)
        self.assertEqual(5.0, report.age(now=105.0))
        self.assertEqual(-1.0, report.age(now=99.0))


class TestRejected(testcase.TestCase):
    """Each bad report is refused with a reason naming the fault.

    parse() raises InvalidReport; decode() returns None and logs the reason.
    """

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(
            name='mlaccel.hostreport'))

    def assertRejected(self, raw, reason, **bounds):
        exc = self.assertRaises(hostreport.InvalidReport,
                                hostreport.parse, raw, **bounds)
        self.assertIn(reason, str(exc))
        self.assertIsNone(hostreport.decode(raw, 'cmp9', **bounds))
        self.assertIn('Rejected host report from cmp9: %s' % exc,
                      self.log.output)

    def test_not_json(self):
        self.assertRejected(b'{"version": "1.0", ', 'not valid JSON')

    def test_not_utf8(self):
        self.assertRejected(b'{"host": "\xff\xfe\xfa"}', 'not valid JSON')

    def test_not_text(self):
        for raw in (None, 42, {'host': 'cmp1'}, ['x']):
            self.assertRejected(raw, 'not JSON text')

    def test_not_an_object(self):
        for raw in (b'[]', b'"1.0"', b'12', b'null', b'true'):
            self.assertRejected(raw, 'not an object')

    def test_oversized(self):
        data = valid(cached_images=['image-%05d' % i for i in range(6000)])
        self.assertRejected(dumps(data), 'more than the 65536 allowed')

    def test_oversized_against_a_configured_bound(self):
        self.assertRejected(dumps(valid()), 'more than the 100 allowed',
                            max_bytes=100)

    def test_deep_nesting(self):
        depth = 20000
        self.assertRejected(b'[' * depth + b']' * depth, 'not valid JSON')
        nested = b'[' * depth + b'"x"' + b']' * depth
        raw = dumps(valid(cached_images='HOLE')).replace(b'"HOLE"', nested)
        self.assertRejected(raw, 'not valid JSON')

    def test_shallow_nesting_in_a_field(self):
        self.assertRejected(dumps(valid(cached_images=[['img-a']])),
                            'cached_images')
        self.assertRejected(dumps(valid(timestamp={'t': 1})), 'timestamp')

    def test_nan_and_infinity(self):
        for field in ('timestamp', 'fetch_bandwidth', 'build_throughput'):
            for token in (b'NaN', b'Infinity', b'-Infinity', b'1e999'):
                raw = dumps(valid(**{field: 'HOLE'})).replace(
                    b'"HOLE"', token)
                self.assertRejected(raw, field)

    def test_encode_refuses_nan(self):
        report = hostreport.HostReport('cmp1', math.nan)
        self.assertRaises(hostreport.InvalidReport, hostreport.encode, report)

    def test_bools_where_numbers_go(self):
        for field in ('timestamp', 'cache_free_bytes', 'fetch_bandwidth',
                      'builds_in_flight', 'build_throughput', 'build_limit'):
            self.assertRejected(dumps(valid(**{field: True})),
                                '%s: True is not a number' % field)

    def test_fractions_where_integers_go(self):
        for field in ('cache_free_bytes', 'builds_in_flight', 'build_limit'):
            self.assertRejected(dumps(valid(**{field: 1.5})), field)

    def test_strings_where_numbers_go(self):
        self.assertRejected(dumps(valid(builds_in_flight='3')),
                            'builds_in_flight')

    def test_out_of_range(self):
        self.assertRejected(dumps(valid(builds_in_flight=-1)),
                            'builds_in_flight: -1 is out of the range')
        self.assertRejected(dumps(valid(cache_free_bytes=2 ** 64)),
                            'cache_free_bytes')
        self.assertRejected(dumps(valid(timestamp=1e12)), 'timestamp')

    def test_integer_too_long_to_parse(self):
        raw = dumps(valid(build_limit='HOLE')).replace(b'"HOLE"', b'9' * 5000)
        self.assertRejected(raw, 'not valid JSON')

    def test_version_1_0_reports_with_warm_slots_are_still_read(self):
        # An agent not yet upgraded: its warm_slots is ignored.
        report = hostreport.parse(dumps(valid(version='1.0', warm_slots=1)))
        self.assertEqual(hostreport.parse(dumps(valid())), report)
        self.assertFalse(hasattr(report, 'warm_slots'))

    def test_1_1_reports_drop_warm_slots(self):
        self.assertEqual('1.1', hostreport.VERSION)
        data = json.loads(hostreport.encode(hostreport.parse(dumps(valid()))))
        self.assertEqual('1.1', data['version'])
        self.assertNotIn('warm_slots', data)

    def test_future_major_version(self):
        self.assertRejected(dumps(valid(version='2.0')),
                            'report version 2.0 is not the 1.x')

    def test_malformed_versions(self):
        for version in ('1', '1.0.1', 'v1.0', '', 1.0, None, DELETE, ['1']):
            self.assertRejected(dumps(valid(version=version)), 'version')

    def test_missing_required_fields(self):
        self.assertRejected(dumps(valid(host=DELETE)),
                            'host: required field is missing')
        self.assertRejected(dumps(valid(timestamp=DELETE)),
                            'timestamp: required field is missing')

    def test_bad_host_names(self):
        for host in ('', 'h' * 256, 7, True, None, ['cmp1']):
            self.assertRejected(dumps(valid(host=host)), 'host')

    def test_bad_image_ids(self):
        for image in ('', 'i' * 256, 7, None):
            self.assertRejected(dumps(valid(cached_images=['ok', image])),
                                'cached_images')
        self.assertRejected(dumps(valid(cached_images='img-a')),
                            'must be a list')

    def test_too_many_images(self):
        data = valid(cached_images=['img-%d' % i for i in range(4)])
        self.assertRejected(dumps(data),
                            'lists 4 cached images, more than the 3 allowed',
                            max_cached_images=3)
        self.assertEqual(4, len(hostreport.parse(
            dumps(data), max_cached_images=4).cached_images))

    def test_too_many_images_by_default(self):
        data = valid(cached_images=[str(i) for i in range(
            hostreport.MAX_CACHED_IMAGES + 1)])
        self.assertRejected(dumps(data), 'cached images, more than')

    def test_bad_agent_version(self):
        for agent_version in (3, 'v' * 65, None):
            self.assertRejected(dumps(valid(agent_version=agent_version)),
                                'agent_version')

    def test_encode_refuses_what_decode_would_refuse(self):
        big = hostreport.HostReport('cmp1', 1.0, cached_images=frozenset(
            'image-%05d' % i for i in range(4000)))
        self.assertRaises(hostreport.InvalidReport, hostreport.encode, big,
                          max_bytes=1024)
        self.assertRaises(hostreport.InvalidReport, hostreport.encode,
                          hostreport.HostReport('', 1.0))
        self.assertRaises(hostreport.InvalidReport, hostreport.encode,
                          hostreport.HostReport('cmp1', 1.0,
                                                builds_in_flight=-2))


class TestFuzzed(testcase.TestCase):
    """decode() never raises, whatever arrives.

    What it refuses, parse() refuses with an InvalidReport and a reason.
    """

    def check(self, raw, **bounds):
        result = hostreport.decode(raw, 'fuzz', **bounds)
        if result is None:
            exc = self.assertRaises(hostreport.InvalidReport,
                                    hostreport.parse, raw, **bounds)
            self.assertTrue(str(exc))
        else:
            self.assertIsInstance(result, hostreport.HostReport)
            # Anything accepted is a report we can encode again.
            self.assertEqual(result, hostreport.parse(
                hostreport.encode(result)))

    def setUp(self):
        super().setUp()
        # Thousands of rejections would flood the test log.
        self.useFixture(fixtures.FakeLogger(name='mlaccel.hostreport'))

    @FUZZ
    @given(st.binary(max_size=2048))
    def test_random_bytes(self, raw):
        self.check(raw)

    @FUZZ
    @given(st.text(max_size=512))
    def test_random_text(self, raw):
        self.check(raw)

    @FUZZ
    @given(json_values)
    def test_random_json(self, value):
        self.check(json.dumps(value).encode())

    @FUZZ
    @given(st.dictionaries(
        st.sampled_from(sorted(valid())), json_values, max_size=12))
    def test_random_values_in_report_fields(self, changes):
        data = valid()
        data.update(changes)
        self.check(dumps(data), max_bytes=4096, max_cached_images=8)

    @FUZZ
    @given(reports, st.integers(0, 200))
    def test_truncated_reports(self, report, cut):
        raw = hostreport.encode(report)
        self.check(raw[:len(raw) - cut - 1])
