"""Configuration options of mlaccel, one module per option group.

Every service that loads mlaccel code (nova-scheduler, the agent, the task
daemon, the launcher) registers all groups on its own ``ConfigOpts`` through
:func:`register_opts`; ``mlaccel.conf.CONF`` is the process-global default.
"""

from oslo_config import cfg

from mlaccel.conf import costmodel
from mlaccel.conf import launcher
from mlaccel.conf import scheduler
from mlaccel.conf import statebus
from mlaccel.conf import taskd

CONF = cfg.CONF

_MODULES = (costmodel, launcher, scheduler, statebus, taskd)


def register_opts(conf):
    """Register every mlaccel option group on ``conf`` (idempotent)."""
    for module in _MODULES:
        module.register_opts(conf)


def list_opts():
    """Return ``[(group, [opts])]`` for oslo-config-generator."""
    return [(module.GROUP, module.list_opts()) for module in _MODULES]


register_opts(CONF)
