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

"""Keep one backend's report (:mod:`mlaccel.cinder.report`) on the bus.

Published every ``report_interval`` seconds and as soon as the backend's
golden images change, by one thread per backend through the state bus's
:class:`~mlaccel.statebus.publisher.Publisher`. A bus that cannot be reached
is logged once and retried; the cache keeps working without it.
"""

import threading
import time

from oslo_log import log as logging

from mlaccel.cinder import report
from mlaccel import statebus
from mlaccel.statebus import publisher

LOG = logging.getLogger(__name__)


class ReportLoop:
    """Publishes the golden images of a :class:`~.mirror.Mirror`.

    :param conf: the whole ``ConfigOpts`` (``[mlaccel_statebus]`` and
        ``[mlaccel_cinder]``).
    """

    def __init__(self, mirror, conf, publisher_=None):
        self.mirror = mirror
        self.conf = conf
        self.interval = conf.mlaccel_cinder.report_interval
        self.publisher = publisher_ or publisher.Publisher(
            mirror.host, conf, codec=report.BackendReportCodec(),
            group=conf.mlaccel_cinder.report_group)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        self.failing = False
        self.published = 0

    def report(self):
        return report.BackendReport(
            self.mirror.host, time.time(),
            frozenset(e['image_id'] for e in self.mirror.cache.entries()
                      if not e['filling']))

    def changed(self):
        """The golden images changed: publish now."""
        self._wake.set()

    def publish(self):
        """Publish once; False (logged once) if the bus refused."""
        try:
            self.publisher.publish(self.report())
        except Exception as exc:
            if not self.failing:
                LOG.warning('Cannot publish the golden images of %s on the '
                            'state bus, retrying: %s', self.mirror.host,
                            statebus.redact(self.conf, exc))
            self.failing = True
            return False
        if self.failing:
            LOG.info('Golden images of %s published again.',
                     self.mirror.host)
        self.failing = False
        self.published += 1
        return True

    def start(self):
        if not self.interval or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='mlaccel-backend-report')
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self.publisher.stop()

    def _run(self):
        while not self._stop.is_set():
            self._wake.clear()
            self.publish()
            self._wake.wait(self.interval)
