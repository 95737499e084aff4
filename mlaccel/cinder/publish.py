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

"""Keep one backend's report (:mod:`mlaccel.cinder.backendreport`) on the bus.

Published every ``report_interval`` seconds and as soon as the backend's
golden images change, by one thread per backend through the state bus's
:class:`~mlaccel.statebus.publisher.Publisher`. A bus that cannot be reached
is logged once and retried; the cache keeps working without it.
"""

import time

from oslo_log import log as logging

from mlaccel.cinder import backendreport
from mlaccel import periodic
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
            mirror.host, conf, codec=backendreport.BackendReportCodec(),
            group=conf.mlaccel_cinder.report_group)
        self._loop = periodic.Periodic('mlaccel-backend-report',
                                       self.interval, self.publish,
                                       wakeable=True)
        self._started = False
        self.failing = False
        self.published = 0

    def report(self):
        return backendreport.BackendReport(
            self.mirror.host, time.time(),
            frozenset(e['image_id'] for e in self.mirror.cache.entries()
                      if not e['filling']))

    def changed(self):
        """The golden images changed: publish now."""
        self._loop.wake()

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
        """Publish now and then every ``report_interval`` seconds."""
        if self.interval:
            self._started = True
            self._loop.start()

    def stop(self):
        """Stop publishing; the report leaves the bus."""
        self._loop.stop()
        if self._started:
            self.publisher.stop()
