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

"""The all-in-one cloud's state between the experiment's runs.

:func:`empty_caches` empties what a run may have warmed: every compute's
Nova image cache (each file deleted under nova-compute's own lock for it),
Cinder's golden and ready-pool volumes (the internal tenant's) and every
warm pool. :class:`ArmSwitch` then turns each mechanism on or off,
restarting only the services whose configuration changed.
"""

from concurrent import futures
import os
import time

from oslo_concurrency import lockutils
from oslo_config import cfg

from mlaccel.agent import novaconf
from mlaccel.cmd import cinder_config
from mlaccel.cmd import config as mlaccel_config
from mlaccel import conf as mlaccel_conf
from mlaccel import inifile
from mlaccel.nova import actions
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import demand as pool_demand
from mlaccel.pool import members as pool_members
from mlaccel.pool import store as pool_store
from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.testing.aio import agents
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import pools
from mlaccel_lab.testing.aio import procs

WAIT = 300.0


def wait_for(predicate, what, timeout=WAIT, interval=0.5):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError('timed out after %.0f s waiting for %s'
                               % (timeout, what))
        time.sleep(interval)


def empty_image_caches(lay):
    """Delete every cached image of every compute; return bytes freed.

    Each under nova-compute's external lock for that file
    (``$instances_path/locks/nova-<name>``), so a build or a pre-fetch
    filling it meanwhile finishes first.
    """
    freed = 0
    for host in lay.compute_hosts():
        settings = novaconf.load(configs.compute_config_files(lay, host))
        try:
            names = os.listdir(settings.cache_dir)
        except FileNotFoundError:
            continue
        for name in names:
            base = name.split('.', 1)[0]
            with lockutils.lock(base, lock_file_prefix='nova-',
                                external=True, lock_path=settings.lock_dir):
                path = os.path.join(settings.cache_dir, name)
                try:
                    freed += os.path.getsize(path)
                    os.unlink(path)
                except FileNotFoundError:
                    pass
    return freed


def empty_volume_cache(conn):
    """Delete the internal tenant's volumes (golden volumes, ready clones).

    Returns how many were deleted once Cinder lists none of them.
    """
    storage = conn.block_storage
    found = [v for v in storage.volumes(
        details=True, all_projects=True,
        project_id=configs.CINDER_INTERNAL_PROJECT)]
    for volume in found:
        storage.delete_volume(volume, ignore_missing=True, force=True)
    wait_for(lambda: not list(storage.volumes(
        all_projects=True, project_id=configs.CINDER_INTERNAL_PROJECT)),
        'the golden volumes to go')
    return len(found)


def delete_servers(conn, name_filters):
    """Delete the servers whose names match any of ``name_filters``.

    What a run interrupted midway left behind, or a pool's members;
    returns how many there were once Nova lists none of them. A delete
    that failed leaves its server in ERROR (nova-compute cannot tell a
    scheduler being restarted beside the reset that the instance went):
    such a server is deleted again.
    """
    compute = conn.compute

    def listed():
        return [s for pattern in name_filters for s in compute.servers(
            all_projects=True, name=pattern)
            if s.status not in ('DELETED', 'SOFT_DELETED')]

    def gone():
        left = listed()
        for server in left:
            if server.status == 'ERROR' and not server.task_state:
                compute.delete_server(server, ignore_missing=True)
        return not left

    found = listed()
    for server in found:
        compute.delete_server(server, ignore_missing=True)
    wait_for(gone, 'leftover servers to go')
    return len(found)


def pool_conf(lay):
    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    conf([], project='mlaccel', default_config_files=[
        pools.config_file(lay)])
    return conf


def empty_pools(conn, store):
    """Delete every pool and every server of one; return how many pools.

    The pool manager must be stopped (:meth:`ArmSwitch.set_manager`): its
    builds have ended, each deleting its VM, and nothing makes or fills a
    pool meanwhile. Every server under a pool's name goes (members, a
    build's or a claim's leftovers), then the pools. Forget the demand
    first (:func:`forget_demand`), or a learning manager started later
    makes its pools again.
    """
    keys = list(store.keys())
    delete_servers(conn, ['^' + pool_members.name_prefix('')])
    for key in keys:
        try:
            with store.transaction(key) as state:
                state['members'] = {}
            store.delete(key)
        except pool_store.NoSuchPool:
            pass
    return len(keys)


def idle_seconds(store):
    """Idle VM-seconds of every pool so far (members idle now included)."""
    total = 0.0
    now = time.time()
    for key in store.keys():
        state = store.read(key)
        total += state['stats']['idle_vm_s']
        for member in pool_store.members(state, pool_store.IDLE):
            since = member.get('idle_since')
            if since is not None:
                total += max(0.0, now - since)
    return total


def forget_demand(store, project_id):
    """Empty the project's demand record, as a fresh install has it."""
    with store.transaction(pool_demand.document_key(project_id),
                           create=pool_demand.empty(project_id),
                           suffix=pool_demand.SUFFIX) as doc:
        doc.clear()
        doc.update(pool_demand.empty(project_id))


def member_seconds(store, group, conn=None):
    """Every pool's member VM-seconds so far: build, boot, preload, idle.

    With ``conn``, also the members still being built: servers Nova lists
    under a pool's name that its state does not hold yet, each from its
    create request until now.
    """
    now = time.time()
    total = 0.0
    for key in store.keys():
        try:
            state = store.read(key)
        except pool_store.NoSuchPool:
            continue
        total += pool_cli.summary(state, group, now)['member_vm_s']
        if conn is not None:
            total += sum(
                now - actions.parse_time(server.created_at)
                for server in conn.compute.servers(
                    name=pool_members.name_filter(key))
                if server.id not in state['members'] and server.created_at)
    return total


#: Cinder's own image-volume cache, as its docs set it for a backend (the
#: internal tenant it needs is configured in every all-in-one cloud).
CINDER_CACHE_OPTION = 'image_volume_cache_enabled'


class ArmSwitch:
    """Turns the cloud's mechanisms on and off; knows what is on now.

    :param manager_config_files: configuration files the pool manager
        reads after the cloud's ``pool.conf`` (the experiment's learning).
    """

    def __init__(self, lay, conn, manager_config_files=()):
        self.lay = lay
        self.conn = conn
        self.manager_config_files = list(manager_config_files)
        self.nova_conf = lay.path('etc', 'nova', 'nova.conf')
        self.cinder_conf = lay.path('etc', 'cinder', 'cinder.conf')

    # what is on ----------------------------------------------------------
    def scheduler_on(self):
        filters = inifile.IniFile(self.nova_conf).get(
            mlaccel_config.SCHEDULER_GROUP, 'available_filters') or []
        return mlaccel_config.MLACCEL_FILTERS in filters

    def mirror_on(self):
        ini = inifile.IniFile(self.cinder_conf)
        driver = ini.get(cloud.CINDER_BACKEND, 'volume_driver') or []
        return bool(driver) and driver[-1] == cinder_config.MIRROR

    def cinder_cache_on(self):
        ini = inifile.IniFile(self.cinder_conf)
        return (ini.get(cloud.CINDER_BACKEND, CINDER_CACHE_OPTION)
                or ['false'])[-1].lower() == 'true'

    def agents_on(self):
        return all(procs.running(self.lay, agents.service(h))
                   for h in self.lay.compute_hosts())

    def manager_on(self):
        return procs.running(self.lay, pools.SERVICE)

    # switching -----------------------------------------------------------
    def set_agents(self, on):
        """Start or stop every compute's agent; stops run side by side."""
        hosts = [host for host in self.lay.compute_hosts()
                 if procs.running(self.lay, agents.service(host)) != on]
        if on:
            for host in hosts:
                agents.start(self.lay, host)
            return
        with futures.ThreadPoolExecutor(max(1, len(hosts))) as stops:
            list(stops.map(lambda host: procs.stop(
                self.lay, agents.service(host), cloud.STOP_TIMEOUT), hosts))

    def set_scheduler(self, on):
        if self.scheduler_on() == on:
            return False
        ini = inifile.IniFile(self.nova_conf)
        if on:
            mlaccel_config.enable_scheduler(ini)
        else:
            mlaccel_config.disable_scheduler(ini)
        ini.save()
        procs.stop(self.lay, 'nova-scheduler', cloud.STOP_TIMEOUT)
        since = time.time()
        procs.start(self.lay, 'nova-scheduler', [
            self.lay.bin('nova-scheduler'), '--config-file', self.nova_conf])
        cloud.wait_service_up(self.lay, self.conn, 'nova-scheduler', since)
        return True

    def set_mirror(self, on):
        return self.set_cinder(on, self.cinder_cache_on())

    def set_cinder(self, mirror, cache):
        """Set the mirror driver and Cinder's cache; one restart if any."""
        if self.mirror_on() == mirror and self.cinder_cache_on() == cache:
            return False
        ini = inifile.IniFile(self.cinder_conf)
        if mirror:
            cinder_config.enable_mirror(ini, [cloud.CINDER_BACKEND])
        else:
            cinder_config.disable_mirror(ini)
        ini.set(cloud.CINDER_BACKEND, CINDER_CACHE_OPTION,
                [str(cache).lower()])
        ini.save()
        cloud.restart_cinder(self.lay, self.conn, mirror=mirror)
        return True

    def set_manager(self, on):
        if on and not self.manager_on():
            pools.start_manager(self.lay, more_config_files=(
                self.manager_config_files))
        elif not on and self.manager_on():
            procs.stop(self.lay, pools.SERVICE, cloud.STOP_TIMEOUT)

    def apply(self, arm):
        """Configure ``arm``; returns the services restarted."""
        changed = []
        if self.set_scheduler(arm.on(arms_mod.SCHEDULER)):
            changed.append('nova-scheduler')
        if self.lay.settings.cinder and self.set_cinder(
                arm.on(arms_mod.MIRROR),
                arm.tuned(arms_mod.CINDER_IMAGE_CACHE)):
            changed.append('cinder')
        self.set_agents(arm.on(arms_mod.AGENT))
        self.set_manager(arm.on(arms_mod.POOL))
        return changed


def open_store(lay):
    return pool_cli.open_store(pool_conf(lay))
