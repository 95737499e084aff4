"""mlaccel's scheduler filters, for ``[filter_scheduler] available_filters``.

``available_filters = mlaccel.scheduler.filters.all_filters`` makes every
filter of the ``mlaccel.scheduler.filters`` namespace available; enable them
by class name in ``enabled_filters``.
"""

from mlaccel import scheduler


def all_filters():
    return scheduler.load_classes(scheduler.FILTERS_NAMESPACE)
