# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Predict how many seconds a host needs to start a task VM.

The prediction covers the stages mlaccel shortens, from the moment a host
is chosen: *creation* (image transfer unless cached, then the build, queued
behind the builds already in flight) and *buffering* (a cold process start:
no report says where a warm task-daemon slot waits). Every figure comes
from the host's report where it measured one; where it did not (a new or
restarted agent), from what its peers measured (:meth:`CostModel.with_peers`);
and from ``[mlaccel_costmodel]`` defaults when no host measured it, or when
the host has no report.
"""

import bisect
import collections
import copy
import itertools

from mlaccel import conf as mlaccel_conf

Prediction = collections.namedtuple(
    'Prediction', ['fetch', 'build', 'buffering'])
Prediction.total = property(lambda self: self.fetch + self.build
                            + self.buffering)
Prediction.__doc__ = 'Predicted seconds per part of a VM start.'

StartRequest = collections.namedtuple(
    'StartRequest', ['image_id', 'image_size'])
StartRequest.__doc__ = ('What a VM start needs: its image (id and size in '
                        'bytes, None if unknown). No report says where a '
                        'warm task daemon waits (warm pools hand theirs out '
                        'without the scheduler), so every host is predicted '
                        'a cold start.')

Options = collections.namedtuple(
    'Options', ['fetch_bandwidth', 'image_size', 'build_seconds',
                'cold_start'])
Options.__doc__ = 'The ``[mlaccel_costmodel]`` values a model was made with.'

Terms = collections.namedtuple(
    'Terms', ['cached_images', 'per_byte', 'fixed'])
Terms.__doc__ = ('What a prediction needs of a host\'s report: the image '
                 'ids it caches, its transfer seconds per byte, and the '
                 'seconds that do not depend on the image (build and '
                 'buffering).')


class CostModel:
    """Seconds-to-task-start predictions from host reports.

    Build one per request batch (it reads the options once), then call
    :meth:`predict` or :meth:`seconds` per host, both O(1), or
    :meth:`seconds_each` for every host of a request at once.
    """

    def __init__(self, conf=None):
        opts = (conf or mlaccel_conf.CONF).mlaccel_costmodel
        self.fetch_bandwidth = opts.default_fetch_bandwidth
        self.image_size = opts.default_image_size
        self.build_seconds = opts.default_build_seconds
        self.cold_start = opts.cold_start_seconds
        #: The :class:`Options`, as read: :meth:`with_peers` leaves them
        #: as they are, and a host without a report is predicted from them.
        self.options = Options(self.fetch_bandwidth, self.image_size,
                               self.build_seconds, self.cold_start)

    @property
    def params(self):
        """The values the predictions depend on."""
        return (self.fetch_bandwidth, self.image_size, self.build_seconds,
                self.cold_start)

    def __eq__(self, other):
        return isinstance(other, CostModel) and self.params == other.params

    __hash__ = None

    def with_peers(self, reports):
        """A copy predicting unmeasured figures from the hosts' own.

        A host whose report has not measured its fetch bandwidth or its
        build throughput yet (an agent just started) is predicted with the
        median of the hosts that have, not with the options' defaults: a
        default far from what the cloud measures would make every measured
        host look faster (or slower) than an unmeasured peer of the same
        hardware, and send a whole burst to one of them. Defaults stay for
        a figure no host measured, and for every host without a report (of
        which nothing is known, not even how busy it is).
        """
        return Peers(reports).model(self)

    @staticmethod
    def measured(report):
        """Whether ``report`` measured every figure :meth:`terms` reads.

        Its terms are then the same under every model of the same
        :attr:`options`, whatever its peers measured.
        """
        return report.fetch_bandwidth > 0 and report.build_throughput > 0

    def build(self, report, queued=0):
        """Predicted seconds until a new build on the host completes.

        ``queued`` is as for :meth:`predict`.
        """
        ahead = report.builds_in_flight + queued
        if report.build_throughput > 0:
            # Little's law: with N builds ahead draining at the measured
            # rate, ours completes after (N + 1) / rate; with a free slot,
            # after one build's time (limit / rate, the rate being the
            # limit's slots at work).
            return max(ahead + 1, report.build_limit) \
                / report.build_throughput
        return self.build_seconds * (1 + ahead // max(report.build_limit, 1))

    def terms(self, report, queued=0):
        """The :class:`Terms` of a host's report.

        Whatever does not depend on the request, so that the report cache
        can work it out once per report. ``queued`` is as for
        :meth:`predict`.
        """
        return Terms(report.cached_images,
                     1.0 / (report.fetch_bandwidth or self.fetch_bandwidth),
                     self.build(report, queued) + self.cold_start)

    def predict(self, report, request, queued=0):
        """Return the :class:`Prediction` for ``request`` on a host.

        :param report: the host's :class:`~mlaccel.hostreport.HostReport`,
            or ``None`` when it has none (every default applies, the image
            counts as not cached and ``queued`` is ignored, so that every
            host without a report is predicted alike).
        :param request: a :class:`StartRequest`.
        :param queued: builds sent to the host that its report does not
            count yet (the scheduler's own placements of a burst).
        """
        size = self._size(request)
        if report is None:
            return Prediction(size / self.options.fetch_bandwidth,
                              self.options.build_seconds, self.cold_start)
        bandwidth = report.fetch_bandwidth or self.fetch_bandwidth
        return Prediction(
            0.0 if request.image_id in report.cached_images
            else size * (1.0 / bandwidth),
            self.build(report, queued), self.cold_start)

    def seconds(self, report, request, queued=0):
        """The total of :meth:`predict`, as :meth:`seconds_each` adds it."""
        return self.seconds_of(
            [None if report is None else self.terms(report, queued)],
            request)[0]

    def seconds_each(self, reports, request, queued=None, cached=None):
        """:meth:`seconds` for many hosts in one pass.

        :param reports: a report or ``None`` per host.
        :param queued: ``None``, or the ``queued`` of each host.
        :param cached: ``None``, or a list to which whether each report
            lists the image is appended (``False`` without a report).
        """
        terms = self.terms
        return self.seconds_of(
            [None if report is None else terms(report, extra)
             for report, extra in zip(reports,
                                      queued or itertools.repeat(0))],
            request, cached)

    def seconds_of(self, host_terms, request, cached=None, holders=None):
        """:meth:`seconds_each` from each host's :meth:`terms` (or ``None``).

        The scheduler's inner loop. ``host_terms`` may hold anything with
        the attributes of :class:`Terms` (the report cache's entries do).
        ``holders``, if given, is the collection of those items that hold
        the image, looked up by identity instead of each item's own
        ``cached_images``: one small set stays in the CPU caches where ten
        thousand would not.
        """
        size = self._size(request)
        image_id = request.image_id
        unreported = size / self.options.fetch_bandwidth \
            + self.options.build_seconds + self.cold_start
        if image_id is None:
            hits = [False] * len(host_terms)
        elif holders is not None:
            hits = [t in holders for t in host_terms]
        else:
            hits = [t is not None and image_id in t.cached_images
                    for t in host_terms]
        out = [unreported if t is None
               else t.fixed if hit else t.fixed + size * t.per_byte
               for t, hit in zip(host_terms, hits)]
        if cached is not None:
            cached.extend(hits)
        return out

    def _size(self, request):
        return self.image_size if request.image_size is None \
            else request.image_size


class Peers:
    """What the hosts measured, kept sorted for :meth:`CostModel.with_peers`.

    Updated one report at a time (:meth:`add`, :meth:`remove`), so that a
    cache of ten thousand reports works out the medians of a refresh in
    proportion to the reports that changed, not to all of them.
    """

    __slots__ = ('bandwidths', 'durations')

    def __init__(self, reports=()):
        self.bandwidths, self.durations = [], []
        for report in reports:
            bandwidth, duration = _figures(report)
            if bandwidth is not None:
                self.bandwidths.append(bandwidth)
            if duration is not None:
                self.durations.append(duration)
        self.bandwidths.sort()
        self.durations.sort()

    def copy(self):
        peers = Peers()
        peers.bandwidths = list(self.bandwidths)
        peers.durations = list(self.durations)
        return peers

    def add(self, report):
        for values, value in zip((self.bandwidths, self.durations),
                                 _figures(report)):
            if value is not None:
                bisect.insort(values, value)

    def remove(self, report):
        """Take out what :meth:`add` put in for ``report``."""
        for values, value in zip((self.bandwidths, self.durations),
                                 _figures(report)):
            if value is not None:
                i = bisect.bisect_left(values, value)
                if i == len(values) or values[i] != value:
                    raise ValueError('%r was not added' % (report,))
                del values[i]

    def model(self, base):
        """A copy of the :class:`CostModel` ``base`` with the medians."""
        peers = copy.copy(base)
        if self.bandwidths:
            peers.fetch_bandwidth = _median(self.bandwidths)
        if self.durations:
            peers.build_seconds = _median(self.durations)
        return peers


def _figures(report):
    """``(fetch bandwidth, build seconds)`` ``report`` measured, or None."""
    return (report.fetch_bandwidth if report.fetch_bandwidth > 0 else None,
            max(report.build_limit, 1) / report.build_throughput
            if report.build_throughput > 0 else None)


def _median(values):
    """The median of the sorted ``values``, as ``statistics.median``."""
    half = len(values) // 2
    if len(values) % 2:
        return values[half]
    return (values[half - 1] + values[half]) / 2
