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

"""The backend report: which images a Cinder backend holds golden.

Each backend of the mirror-volume driver publishes one on the state bus, in
its own group (``[mlaccel_cinder] report_group``), signed like a compute
node's host report; Cinder's scheduler reads them through the same report
cache. A report is compact JSON with a ``MAJOR.MINOR`` version: readers take
any minor version of the major they know and refuse a newer major.
"""

import dataclasses
import json
import re

from mlaccel import hostreport

MAJOR = 1
MINOR = 0
VERSION = '%d.%d' % (MAJOR, MINOR)

MAX_REPORT_BYTES = 262144
MAX_IMAGES = 4096
_MAX_NAME = 255
_VERSION_RE = re.compile(r'([0-9]{1,4})\.([0-9]{1,4})')


@dataclasses.dataclass(frozen=True)
class BackendReport:
    """One backend's golden images.

    :param host: the backend, ``host@backend`` as Cinder names it.
    :param timestamp: UNIX time the report was made.
    :param golden_images: ids of the images with a ready golden volume.
    """

    host: str
    timestamp: float
    golden_images: frozenset = frozenset()

    def to_dict(self):
        return {'version': VERSION, 'host': self.host,
                'timestamp': self.timestamp,
                'golden_images': sorted(self.golden_images)}


def encode(report):
    """Compact UTF-8 JSON; raises ValueError if a reader would refuse it."""
    raw = json.dumps(report.to_dict(), separators=(',', ':'),
                     sort_keys=True).encode()
    parse(raw)
    return raw


def parse(raw):
    """The :class:`BackendReport` in ``raw``; ValueError with the reason."""
    data, _size = hostreport.load_json(raw, MAX_REPORT_BYTES)
    if not isinstance(data, dict):
        raise ValueError('report is not a JSON object')
    match = _VERSION_RE.fullmatch(str(data.get('version', '')))
    if match is None or int(match.group(1)) != MAJOR:
        raise ValueError('report version %r is not %d.x'
                         % (data.get('version'), MAJOR))
    host, timestamp = data.get('host'), data.get('timestamp')
    if not isinstance(host, str) or not 0 < len(host) <= _MAX_NAME:
        raise ValueError('report has no valid host')
    if (isinstance(timestamp, bool)
            or not isinstance(timestamp, (int, float))
            or not 0 <= timestamp < 1e11):
        raise ValueError('report has no valid timestamp')
    images = data.get('golden_images', [])
    if (not isinstance(images, list) or len(images) > MAX_IMAGES
            or not all(isinstance(i, str) and 0 < len(i) <= _MAX_NAME
                       for i in images)):
        raise ValueError('golden_images is not a list of at most %d image '
                         'ids' % MAX_IMAGES)
    return BackendReport(host, float(timestamp), frozenset(images))


class BackendReportCodec:
    """Backend reports on the state bus (:mod:`mlaccel.statebus.codec`)."""

    kind = 'volume backend report'

    @staticmethod
    def encode(report):
        return encode(report)

    @staticmethod
    def decode(raw):
        return parse(raw)
