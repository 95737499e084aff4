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

"""Configuration options of mlaccel, one module per option group.

Each module defines ``GROUP`` (an ``OptGroup``) and ``OPTS``.

Every service that loads mlaccel code (nova-scheduler, the agent, the task
daemon, the launcher) registers all groups on its own ``ConfigOpts`` through
:func:`register_opts`; ``mlaccel.conf.CONF`` is the process-global default.
"""

from oslo_config import cfg

from mlaccel.conf import agent
from mlaccel.conf import cinder
from mlaccel.conf import costmodel
from mlaccel.conf import launcher
from mlaccel.conf import pool
from mlaccel.conf import scheduler
from mlaccel.conf import statebus
from mlaccel.conf import taskd

CONF = cfg.CONF

_MODULES = (agent, cinder, costmodel, launcher, pool, scheduler, statebus,
            taskd)


def register_group(conf, module):
    """Register one option module's ``GROUP`` and ``OPTS`` on ``conf``.

    ``conf`` gets a group object of its own: oslo.config keeps a shallow
    copy of the group it is given, whose option table is the given group's,
    so registering the module's ``GROUP`` itself would let an override set
    on one ``ConfigOpts`` show through every other that registered it.
    """
    group = module.GROUP
    conf.register_group(cfg.OptGroup(
        group.name, title=group.title, help=group.help,
        dynamic_group_owner=group.dynamic_group_owner,
        driver_option=group.driver_option))
    conf.register_opts(module.OPTS, group=group.name)


def register_opts(conf):
    """Register every mlaccel option group on ``conf`` (idempotent)."""
    for module in _MODULES:
        register_group(conf, module)


def list_opts():
    """Return ``[(group, [opts])]`` for oslo-config-generator."""
    return [(module.GROUP, module.OPTS) for module in _MODULES]


register_opts(CONF)
