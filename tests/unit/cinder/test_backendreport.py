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

"""Backend reports: their encoding, their bounds, and the report cache."""

import json
import time

from mlaccel.cinder import backendreport
from mlaccel import conf as mlaccel_conf
from mlaccel.statebus import reader
from tests import fixtures as mlaccel_fixtures
from tests import testcase


class BackendReportTest(testcase.TestCase):

    def test_round_trip(self):
        r = backendreport.BackendReport('node@lvm', 1700000000.5,
                                        frozenset(['b', 'a']))
        raw = backendreport.encode(r)
        self.assertEqual(['a', 'b'], json.loads(raw)['golden_images'])
        self.assertEqual(r, backendreport.parse(raw))

    def test_newer_minor_version_is_read_newer_major_refused(self):
        data = {'version': '1.7', 'host': 'h@b', 'timestamp': 1,
                'golden_images': ['x'], 'future_field': 3}
        self.assertEqual(frozenset(['x']), backendreport.parse(
            json.dumps(data).encode()).golden_images)
        data['version'] = '2.0'
        self.assertRaisesRegex(ValueError, 'version', backendreport.parse,
                               json.dumps(data).encode())

    def test_bad_reports_are_refused_with_the_reason(self):
        for raw, reason in (
                (b'{', 'not valid JSON'),
                (b'[]', 'not a JSON object'),
                (json.dumps({'version': '1.0', 'timestamp': 1}).encode(),
                 'no valid host'),
                (json.dumps({'version': '1.0', 'host': 'h',
                             'timestamp': True}).encode(),
                 'no valid timestamp'),
                (json.dumps({'version': '1.0', 'host': 'h', 'timestamp': 1,
                             'golden_images': [1]}).encode(),
                 'golden_images'),
                (b' ' * (backendreport.MAX_REPORT_BYTES + 1), 'bytes')):
            self.assertRaisesRegex(ValueError, reason, backendreport.parse,
                                   raw)
        too_many = backendreport.BackendReport('h', 1, frozenset(
            str(i) for i in range(backendreport.MAX_IMAGES + 1)))
        self.assertRaises(ValueError, backendreport.encode, too_many)

    def test_report_cache_maps_backends_to_their_reports(self):
        conf = mlaccel_conf.CONF
        mlaccel_conf.register_opts(conf)
        # The codec is under test here, not the signatures.
        self.useFixture(mlaccel_fixtures.GlobalConf()).set(
            'mlaccel_statebus', allow_unsigned_reports=True)
        cache = reader.ReportCache(
            conf, codec=backendreport.BackendReportCodec(),
            group='test-backends')
        now = time.time()
        fresh = backendreport.BackendReport('n@a', now, frozenset(['img']))
        stale = backendreport.BackendReport('n@b', now - 3600,
                                            frozenset(['img']))
        cache.load({b'n@a': backendreport.encode(fresh),
                    b'n@b': backendreport.encode(stale),
                    b'n@c': b'garbage'}, now=now)
        snapshot = cache.current(now)
        self.assertEqual(fresh, snapshot.get('n@a'))
        self.assertIsNone(snapshot.get('n@b'))
        self.assertIsNone(snapshot.get('n@c'))
