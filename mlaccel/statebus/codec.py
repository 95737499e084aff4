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

"""How one kind of report is turned into bytes on the bus and back.

A codec has ``kind`` (a noun for log lines), ``encode(report) -> bytes``
and ``decode(raw) -> report``; both raise ``ValueError`` with the reason a
report is refused. Reports have ``host`` (the name they speak for, the
publisher's member id and the name its key is derived for) and
``timestamp`` (UNIX time, by which readers judge freshness). The publisher
and the report cache take a codec, so another kind of report (a storage
backend's, say) reuses both without copying them.
"""

from mlaccel import hostreport


class HostReportCodec:
    """Compute-node host reports (:mod:`mlaccel.hostreport`)."""

    kind = 'host report'

    def __init__(self, max_bytes=hostreport.MAX_REPORT_BYTES,
                 max_cached_images=hostreport.MAX_CACHED_IMAGES):
        self.max_bytes = max_bytes
        self.max_cached_images = max_cached_images

    @classmethod
    def from_conf(cls, conf):
        """The codec with the bounds of ``[mlaccel_statebus]``."""
        opts = conf.mlaccel_statebus
        return cls(opts.max_report_bytes, opts.max_cached_images)

    def encode(self, report):
        return hostreport.encode(report, self.max_bytes,
                                 self.max_cached_images)

    def decode(self, raw):
        return hostreport.parse(raw, self.max_bytes, self.max_cached_images)
