"""What the plugins need to know about one scheduling request, read once."""

from mlaccel import conf as mlaccel_conf
from mlaccel import costmodel
from mlaccel.scheduler import extra_specs
from mlaccel.statebus import reader


class RequestView:
    """One request as the mlaccel plugins see it.

    :ivar reports: a :class:`~mlaccel.statebus.reader.Snapshot` of the host
        reports; ``reports.get(host)`` is O(1) and ``None`` for a host with
        no fresh report.
    :ivar policy: the flavor's :class:`~mlaccel.scheduler.extra_specs.Policy`.
    :ivar start: the :class:`~mlaccel.costmodel.StartRequest`; its
        ``image_id`` is ``None`` for a volume-backed server.
    """

    __slots__ = ('reports', 'policy', 'start')

    def __init__(self, spec_obj, conf=None):
        conf = conf or mlaccel_conf.CONF
        self.reports = reader.get_cache(conf).snapshot()
        self.policy = extra_specs.policy(spec_obj)
        image_id = image_size = None
        image = getattr(spec_obj, 'image', None)
        if image is not None:
            if image.obj_attr_is_set('id'):
                image_id = image.id
            if image.obj_attr_is_set('size'):
                image_size = image.size
        self.start = costmodel.StartRequest(
            image_id, image_size, self.policy.warm_start)
