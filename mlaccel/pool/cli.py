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

"""What the pool's commands and their users share.

:func:`configure` loads a pool configuration, :func:`open_store` opens the
pools' store, :func:`claimer` makes the launcher's claimer and
:func:`summary` sums up a pool. The commands themselves are
:mod:`mlaccel.cmd.pool` (``mlaccel pool ...``) and
:mod:`mlaccel.cmd.pool_manager` (``mlaccel-pool-manager``).
"""

import os
import time

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import claims
from mlaccel.pool import demand
from mlaccel.pool import manager as pool_manager
from mlaccel.pool import sizing
from mlaccel.pool import store as pool_store

LOG = logging.getLogger(__name__)


def configure(config_files, debug=False, name='mlaccel-pool'):
    conf = mlaccel_conf.CONF
    for name in config_files:
        if not os.path.isfile(name):
            raise cfg.ConfigFilesNotFoundError([name])
    logging.register_options(conf)
    conf(args=[], project='mlaccel', default_config_files=config_files or None)
    for module in (mlaccel_conf.pool, mlaccel_conf.launcher):
        for opt in module.OPTS:
            getattr(getattr(conf, module.GROUP.name), opt.dest)
    if debug:
        conf.set_override('debug', True)
    else:
        # The file's debug counts and is reloaded on SIGHUP.
        conf.clear_override('debug')
    logging.setup(conf, name)
    return conf


def open_store(conf, locks=None):
    group = conf.mlaccel_pool
    return pool_store.PoolStore(
        group.state_dir, lock=locks or pool_store.BusLocks(conf),
        lock_timeout=group.lock_timeout)


def claimer(conf, conn):
    """The launcher's :class:`~mlaccel.pool.claims.Claimer` or ``None``.

    ``None`` when claiming is off or the cloud keeps no pools (no
    ``state_dir``). Otherwise the claimer records every launch's demand,
    whether a pool exists for its key yet or not.
    """
    group = conf.mlaccel_pool
    if not group.claim or not os.path.isdir(group.state_dir):
        return None
    store = open_store(conf)
    return claims.Claimer(store, conn,
                          project_id=claims.project_of(conn, group.project_id),
                          timeout=group.health_timeout,
                          demand=demand.DemandLog.from_conf(store, conf))


def summary(state, group, now=None):
    """One pool's sizes and costs (idle time so far included)."""
    now = time.time() if now is None else now
    stats = state['stats']
    idle = pool_store.members(state, pool_store.IDLE)
    idle_s = stats['idle_vm_s'] + sum(now - m['idle_since'] for m in idle
                                      if m['idle_since'] is not None)
    served = stats['tasks_served']
    member_s = idle_s + stats.get('build_vm_s', 0.0)
    return {'key': state['key'], 'image': state['spec']['image_id'],
            'origin': state.get('origin', 'operator'),
            'flavor': state['spec']['flavor_id'],
            'min': state['bounds']['min'], 'max': state['bounds']['max'],
            'max_tasks': state['max_tasks'], 'idle': len(idle),
            'claimed': len(state['members']) - len(idle),
            'target': pool_manager.target(state, group, now),
            'rate_per_s': sizing.arrival_rate(stats['arrivals'], now,
                                              group.arrival_window),
            'lead_time_s': stats['lead_time_s'],
            'idle_vm_s': idle_s, 'tasks_served': served,
            'idle_vm_s_per_task': idle_s / served if served else None,
            'member_vm_s': member_s,
            'member_vm_s_per_task': member_s / served if served else None,
            'create_failures': stats['create_failures'],
            'paused_s': pool_manager.paused(stats, now) or None}
