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

"""The host report: what a compute node's agent tells the scheduler.

A report is a small JSON document with a ``version`` of the form
``MAJOR.MINOR``. Readers accept any minor version of the major they know
and reject another major. A new minor version only adds fields (readers of
an older minor ignore them) or drops optional ones whose absence every
reader already reads as their default; anything else takes a new major.
So during an upgrade agents and schedulers of both minors mix freely.
:func:`decode` never raises: a malformed, oversized or future-version
report is logged with the reason and yields ``None``.

Versions:

* 1.0: the first.
* 1.1: ``warm_slots`` dropped (it never had a producer: warm task daemons
  are handed out without the scheduler). A 1.0 reader reads its absence as
  0, as it read every report; a 1.1 reader ignores it in a 1.0 report.
"""

import dataclasses
import json
import re
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

MAJOR = 1
MINOR = 1
VERSION = '%d.%d' % (MAJOR, MINOR)

#: Defaults of the size bounds; the state bus passes its configured ones.
MAX_REPORT_BYTES = 65536
MAX_CACHED_IMAGES = 4096

# Field name -> (JSON types accepted, lowest value, highest value). Flat and
# checked by hand: a generic JSON-schema validator costs about 0.6 ms for a
# report listing 100 images, too much for thousands of hosts per refresh.
_NUMBERS = {
    'timestamp': ((int, float), 0, 1e11),
    'cache_free_bytes': ((int,), 0, 2 ** 63),
    'fetch_bandwidth': ((int, float), 0, 1e15),
    'builds_in_flight': ((int,), 0, 2 ** 31),
    'build_throughput': ((int, float), 0, 1e15),
    'build_limit': ((int,), 0, 2 ** 31),
}
_VERSION_RE = re.compile(r'([0-9]{1,4})\.([0-9]{1,4})')
_MAX_NAME = 255


class InvalidReport(ValueError):
    """A host report that must not be used, with the reason."""


@dataclasses.dataclass(frozen=True)
class HostReport:
    """One compute node's state, as its agent measured it.

    :param host: compute host name, as Nova's ``HostState.host``.
    :param timestamp: UNIX time the agent took the measurements.
    :param cached_images: ids of the images in the node's image cache.
    :param cache_free_bytes: free bytes in the image cache.
    :param fetch_bandwidth: measured image download rate, bytes per second
        (0: not measured yet).
    :param builds_in_flight: instance builds running on the node now.
    :param build_throughput: measured builds completed per second under
        the current load (0: not measured yet).
    :param build_limit: the node's adaptive limit of concurrent builds
        (0: no limit known).
    :param agent_version: version of the agent that wrote the report.
    """

    host: str
    timestamp: float
    cached_images: frozenset = frozenset()
    cache_free_bytes: int = 0
    fetch_bandwidth: float = 0.0
    builds_in_flight: int = 0
    build_throughput: float = 0.0
    build_limit: int = 0
    agent_version: str = ''

    def age(self, now=None):
        """Seconds since the report was taken (negative if from the future)."""
        return (time.time() if now is None else now) - self.timestamp

    def to_dict(self):
        data = dataclasses.asdict(self)
        data['cached_images'] = sorted(self.cached_images)
        data['version'] = VERSION
        return data


def encode(report, max_bytes=MAX_REPORT_BYTES,
           max_cached_images=MAX_CACHED_IMAGES):
    """Encode a report as compact UTF-8 JSON bytes.

    :raises InvalidReport: if the encoded report would be rejected by
        :func:`decode` with the same bounds.
    """
    data = report.to_dict()
    raw = json.dumps(data, separators=(',', ':'), sort_keys=True).encode()
    _check(data, len(raw), max_bytes, max_cached_images)
    return raw


def load_json(raw, max_bytes):
    """A report's JSON text, bounded, decoded: ``(data, size in bytes)``.

    Shared by every kind of report on the state bus.

    :raises InvalidReport: with the reason the text was refused.
    """
    if not isinstance(raw, (bytes, bytearray, str)):
        raise InvalidReport('report is a %s, not JSON text'
                            % type(raw).__name__)
    if isinstance(raw, str):
        raw = raw.encode('utf-8', 'surrogatepass')
    if len(raw) > max_bytes:
        raise InvalidReport('report has %d bytes, more than the %d allowed'
                            % (len(raw), max_bytes))
    try:
        return json.loads(raw), len(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidReport('report is not valid JSON: %s' % exc)


def parse(raw, max_bytes=MAX_REPORT_BYTES,
          max_cached_images=MAX_CACHED_IMAGES):
    """Decode and validate one report.

    :raises InvalidReport: with the reason the report was refused.
    """
    data, size = load_json(raw, max_bytes)
    _check(data, size, max_bytes, max_cached_images)
    return HostReport(
        host=data['host'],
        timestamp=float(data['timestamp']),
        cached_images=frozenset(data.get('cached_images', ())),
        cache_free_bytes=data.get('cache_free_bytes', 0),
        fetch_bandwidth=float(data.get('fetch_bandwidth', 0.0)),
        builds_in_flight=data.get('builds_in_flight', 0),
        build_throughput=float(data.get('build_throughput', 0.0)),
        build_limit=data.get('build_limit', 0),
        agent_version=data.get('agent_version', ''),
    )


def decode(raw, source='?', max_bytes=MAX_REPORT_BYTES,
           max_cached_images=MAX_CACHED_IMAGES):
    """Like :func:`parse`, but log the reason and return ``None``."""
    try:
        return parse(raw, max_bytes, max_cached_images)
    except InvalidReport as exc:
        LOG.warning('Rejected host report from %(source)s: %(reason)s',
                    {'source': source, 'reason': exc})
        return None


def _check(data, size, max_bytes, max_cached_images):
    if size > max_bytes:
        raise InvalidReport('report has %d bytes, more than the %d allowed'
                            % (size, max_bytes))
    if not isinstance(data, dict):
        raise InvalidReport('report is a JSON %s, not an object'
                            % type(data).__name__)
    version = data.get('version')
    match = (_VERSION_RE.fullmatch(version)
             if isinstance(version, str) else None)
    if match is None:
        raise InvalidReport('version: %r is not of the form MAJOR.MINOR'
                            % (version,))
    if int(match.group(1)) != MAJOR:
        raise InvalidReport('report version %s is not the %d.x this reader '
                            'understands' % (version, MAJOR))
    for name in ('host', 'timestamp'):
        if name not in data:
            raise InvalidReport('%s: required field is missing' % name)
    _check_name('host', data['host'])
    agent_version = data.get('agent_version', '')
    if not isinstance(agent_version, str) or len(agent_version) > 64:
        raise InvalidReport('agent_version: must be a string of at most 64 '
                            'characters')
    for name, (types, low, high) in _NUMBERS.items():
        value = data.get(name, 0)
        # bool is an int to Python but not a number to JSON.
        if isinstance(value, bool) or not isinstance(value, types):
            raise InvalidReport('%s: %r is not a number of the right kind'
                                % (name, value))
        if not low <= value <= high:
            raise InvalidReport('%s: %r is out of the range %s..%s'
                                % (name, value, low, high))
    images = data.get('cached_images', [])
    if not isinstance(images, list):
        raise InvalidReport('cached_images: must be a list of image ids')
    if len(images) > max_cached_images:
        raise InvalidReport('report lists %d cached images, more than the '
                            '%d allowed' % (len(images), max_cached_images))
    for image in images:
        _check_name('cached_images', image)


def _check_name(field, value):
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_NAME:
        raise InvalidReport('%s: %r is not a non-empty string of at most %d '
                            'characters' % (field, value, _MAX_NAME))
