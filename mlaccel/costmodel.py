"""Predict how many seconds a host needs to start a task VM.

The prediction covers the stages mlaccel shortens, from the moment a host
is chosen: *creation* (image transfer unless cached, then the build, queued
behind the builds already in flight) and *buffering* (warm task-daemon fork
or cold process start). Every figure comes from the host's report where it
measured one, and from ``[mlaccel_costmodel]`` defaults where it did not.
"""

import collections

from mlaccel import conf as mlaccel_conf

Prediction = collections.namedtuple(
    'Prediction', ['fetch', 'build', 'buffering'])
Prediction.total = property(lambda self: self.fetch + self.build
                            + self.buffering)
Prediction.__doc__ = 'Predicted seconds per part of a VM start.'

StartRequest = collections.namedtuple(
    'StartRequest', ['image_id', 'image_size', 'warm_start'])
StartRequest.__doc__ = ('What a VM start needs: its image (id and size in '
                        'bytes, None if unknown) and whether the task can use '
                        'a warm task-daemon slot.')


class CostModel:
    """Seconds-to-task-start predictions from host reports.

    Build one per request batch (it reads the options once), then call
    :meth:`predict` or :meth:`seconds` per host: both are O(1).
    """

    def __init__(self, conf=None):
        opts = (conf or mlaccel_conf.CONF).mlaccel_costmodel
        self.fetch_bandwidth = opts.default_fetch_bandwidth
        self.image_size = opts.default_image_size
        self.build_seconds = opts.default_build_seconds
        self.cold_start = opts.cold_start_seconds
        self.warm_start = opts.warm_start_seconds

    def predict(self, report, request):
        """Return the :class:`Prediction` for ``request`` on a host.

        :param report: the host's :class:`~mlaccel.hostreport.HostReport`,
            or ``None`` when it has none (every default applies and the
            image counts as not cached).
        :param request: a :class:`StartRequest`.
        """
        size = self.image_size if request.image_size is None \
            else request.image_size
        if report is None:
            return Prediction(size / self.fetch_bandwidth, self.build_seconds,
                              self.cold_start)
        if request.image_id in report.cached_images:
            fetch = 0.0
        else:
            fetch = size / (report.fetch_bandwidth or self.fetch_bandwidth)
        if report.build_throughput > 0:
            # Little's law: with N builds ahead draining at the measured
            # rate, ours completes after (N + 1) / rate.
            build = (report.builds_in_flight + 1) / report.build_throughput
        else:
            waves = report.builds_in_flight // max(report.build_limit, 1)
            build = self.build_seconds * (1 + waves)
        warm = request.warm_start and report.warm_slots > 0
        return Prediction(fetch, build,
                          self.warm_start if warm else self.cold_start)

    def seconds(self, report, request):
        """The total of :meth:`predict`."""
        return self.predict(report, request).total
