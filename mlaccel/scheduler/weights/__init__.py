"""mlaccel's scheduler weighers, for ``[filter_scheduler] weight_classes``.

``weight_classes = nova.scheduler.weights.all_weighers,
mlaccel.scheduler.weights.all_weighers`` adds every weigher of the
``mlaccel.scheduler.weighers`` namespace to Nova's own.
"""

from mlaccel import scheduler


def all_weighers():
    return scheduler.load_classes(scheduler.WEIGHERS_NAMESPACE)
