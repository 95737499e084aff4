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

"""The experiment on the all-in-one cloud: ``run aio``.

:class:`AioRunner` brings the cloud up unless one is running under
``--base``, uploads the workload's images (random bytes of each size; a
hot one marked hot in Glance) and, before every run, empties every cache,
pool and the pools' demand record (:mod:`mlaccel_lab.experiment.aiostate`)
and switches the arm's mechanisms on or off, restarting only what changed;
then it launches an untimed warm-up request of an image of its own.

No pool is made or sized from the workload: an arm with pools runs the
cloud's pool manager with learning on for the experiment's project, as an
operator would turn it on, and its pools are whatever the manager learns
from the launches of the run itself. A task of an arm with the task daemon
or warm pools is launched by :func:`mlaccel.launcher.api.launch` (pools
first, its ask recorded as demand, readiness pushed); any other by the
stock path of :mod:`mlaccel_lab.experiment.coldlaunch`. The test virt driver
runs guests as processes: creation costs what a compute does around a
hypervisor (scheduling, image download, volume copies), not a guest's boot.
"""

from concurrent import futures
import math
import os
import sys
import tempfile
import threading
import time

from oslo_log import log as logging

from mlaccel.launcher import api
from mlaccel.launcher import ready_listener
from mlaccel.pool import claims
from mlaccel.pool import demand as pool_demand
from mlaccel.taskd import protocol as taskd_protocol
from mlaccel.tasks import clip
from mlaccel_lab.experiment import aiocosts
from mlaccel_lab.experiment import aiostate
from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import coldlaunch
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner as runner_mod
from mlaccel_lab.experiment import workload as workload_mod
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import cpu
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import procs

LOG = logging.getLogger(__name__)

GIB = 1 << 30
#: The Glance property the agent and the mirror-volume cache read as hot.
HOT_PROPERTY = 'mlaccel_hot'
#: Seconds one task may take, creation to end.
TASK_TIMEOUT = 900.0
#: First part of the names of the servers the experiment's launches make.
NAME_PREFIX = 'mlaccel_experiment'
STOCK_PREFIX = 'mlaccel_experiment_stock'
#: The warm-up request's own image (no task of a workload uses it).
WARMUP_IMAGE_MIB = 16
WARMUP_STEPS = 5


def launcher_path(arm):
    """Whether ``arm`` launches through mlaccel's launcher.

    It does with the task daemon or warm pools (whose members run it);
    otherwise the task starts cold from user-data, as in stock OpenStack.
    """
    return arm.on(arms_mod.TASKD) or arm.on(arms_mod.POOL)


def volume_gb(image_bytes):
    return max(1, math.ceil(image_bytes / GIB))


def boot_volume_gb(image, boot):
    """The boot volume's GiB for ``image`` booted as ``boot``, or ``None``."""
    return volume_gb(image.size) if boot == workload_mod.VOLUME else None


def _timed(call, *args):
    """``(call(*args), the seconds it took)``."""
    started = time.monotonic()
    return call(*args), time.monotonic() - started


class AioRunner(runner_mod.TaskRunner):
    """Runs the arms on the all-in-one cloud (see the module's doc)."""

    kind = 'aio'

    def __init__(self, base, keep_cloud=False, time_scale=1.0, purge=False):
        self.lay = aio_layout.Layout(base)
        self.keep_cloud = keep_cloud
        self.purge = purge
        self.time_scale = time_scale
        self.brought_up = False
        self.conn = None
        self.images = {}
        self.mark = None
        self.cpu_mark = None
        self.store = None
        self.listener = None
        self.warmup_image = None
        self._members_before = 0.0
        self._lock = threading.Lock()

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument(
            '--base', default=os.environ.get(aio_layout.BASE_ENV),
            help='base directory of the all-in-one cloud; one running '
                 'there is used as is, else one is brought up there and '
                 'taken down at the end, its logs left in DIR/log '
                 '(default: $%s, else a new temporary directory, removed)'
                 % aio_layout.BASE_ENV)
        parser.add_argument('--keep-cloud', action='store_true',
                            help='leave a cloud this command brought up '
                                 'running')
        parser.add_argument('--time-scale', type=float, default=1.0,
                            help='wall-clock seconds per second of the '
                                 'workload\'s arrivals (default: 1)')

    @classmethod
    def from_options(cls, options):
        if not options.time_scale >= 0:
            raise ValueError('--time-scale must be 0 or more')
        base = options.base or tempfile.mkdtemp(prefix='mlaccel-aio-')
        return cls(base, options.keep_cloud, options.time_scale,
                   purge=not options.base)

    # prepare -----------------------------------------------------------
    def prepare(self, workload):
        started = time.monotonic()
        if not os.path.exists(self.lay.cloud_file) or not all(
                cloud.status(self.lay).values()) or not cloud.status(
                self.lay):
            # Set first: whatever came up is taken down by close().
            self.brought_up = True
            try:
                cloud.up(self.lay)
            except procs.ServiceError as exc:
                raise runner_mod.RunnerError(
                    'the all-in-one cloud did not come up (logs in %s): %s'
                    % (self.lay.log, exc))
        bringup = time.monotonic() - started
        self.conn = cloud.connect(self.lay)
        self.flavor_id = self._flavor(workload)
        self.project_id = claims.project_of(self.conn)
        self.switch = aiostate.ArmSwitch(self.lay, self.conn, [
            self._learning_config()])
        self.pool_conf = aiostate.pool_conf(self.lay)
        self.store = aiostate.open_store(self.lay)
        self.demand = pool_demand.DemandLog.from_conf(self.store,
                                                      self.pool_conf)
        launcher = self.pool_conf.mlaccel_launcher
        self.listener = ready_listener.ReadinessListener(
            launcher.listen_host, 0, launcher.callback_host)
        self.listener.start()
        for image in workload.images:
            self.images[image.name] = self._upload(image)
        self.warmup_image = self._upload(workload_mod.Image(
            'warmup', WARMUP_IMAGE_MIB * workload_mod.MIB))
        return {'hosts': len(self.lay.compute_hosts()),
                'hypervisor': 'mlaccel test virt driver (guests are '
                              'processes on the compute host)',
                'network': 'loopback', 'cpus': os.cpu_count(),
                'images': {i.name: i.size for i in workload.images},
                'cloud_brought_up': self.brought_up,
                'bringup_seconds': round(bringup, 1),
                'volume_clones': cloud.volume_clones(self.lay),
                runner_mod.POOLS_PREFILLED: False,
                'pool_learning': self._learning_options(),
                # What the simulated manager must learn with to compare.
                'pool_options': {
                    'interval': self.pool_conf.mlaccel_pool.interval},
                'warm_up': 'after every reset, untimed: one VM from an '
                           'image of %d MiB no task uses, of each boot '
                           'kind, by the arm\'s own launch path'
                           % WARMUP_IMAGE_MIB}

    def _learning_options(self):
        """The pool manager's options: learning on for the project.

        Every other pool option keeps its default.
        """
        return {'learn': 'true', 'learn_projects': self.project_id}

    def _learning_config(self):
        path = self.lay.path('etc', 'mlaccel', 'experiment-learn.conf')
        with open(path, 'w') as f:
            f.write('[mlaccel_pool]\n' + ''.join(
                '%s = %s\n' % item
                for item in sorted(self._learning_options().items())))
        return path

    def _flavor(self, workload):
        """A flavor whose disk holds the largest image."""
        disk = volume_gb(max(i.size for i in workload.images))
        name = 'mlaccel-experiment-%dg' % disk
        compute = self.conn.compute
        flavor = compute.find_flavor(name) or compute.create_flavor(
            name=name, ram=128, vcpus=1, disk=disk)
        return flavor.id

    def _upload(self, image):
        """The image's Glance id: random bytes of its size, uploaded once."""
        name = 'mlaccel-experiment-%s-%d' % (image.name, image.size)
        found = self.conn.image.find_image(name)
        if found is not None and found.status == 'active' \
                and found.size == image.size:
            return found.id
        with tempfile.TemporaryFile(dir=self.lay.base) as data:
            left = image.size
            while left:
                chunk = min(left, 16 << 20)
                data.write(os.urandom(chunk))
                left -= chunk
            data.seek(0)
            props = {HOT_PROPERTY: 'true'} if image.hot else {}
            made = self.conn.image.create_image(
                name=name, data=data, disk_format='raw',
                container_format='bare', **props)
        return self.conn.image.wait_for_status(made, 'active', wait=600).id

    # reset -------------------------------------------------------------
    def reset(self, arm):
        """Empty caches, volumes, pools, demand; switch on ``arm``.

        The scheduler's switch and the image caches (the agents stopped
        first) go beside the rest, which they do not touch. Prints each
        step's time: what a shorter reset has to cut.
        """
        clock = cloud.Clock(quiet=True)
        with futures.ThreadPoolExecutor(2) as beside:
            scheduler = beside.submit(_timed, self.switch.set_scheduler,
                                      arm.on(arms_mod.SCHEDULER))
            caches = beside.submit(_timed, self._empty_image_caches)
            aiostate.delete_servers(self.conn, [
                '^%s-' % prefix for prefix in (NAME_PREFIX, STOCK_PREFIX)])
            clock.mark('servers')
            aiostate.forget_demand(self.store, self.project_id)
            # Stopped first: its builds end, each deleting its VM, and
            # nothing races the deletions; the arm's switch restarts it.
            self.switch.set_manager(False)
            aiostate.empty_pools(self.conn, self.store)
            clock.mark('pools')
            restarted = []
            if self.lay.settings.cinder:
                # The mirror driver pre-warms hot images: it would make
                # their golden volumes again while they are being deleted.
                off = self.switch.set_cinder(False, False)
                aiostate.empty_volume_cache(self.conn)
                clock.mark('volume cache')
                if self.switch.set_cinder(
                        arm.on(arms_mod.MIRROR),
                        arm.tuned(arms_mod.CINDER_IMAGE_CACHE)) or off:
                    restarted.append('cinder')
                clock.mark('cinder for the arm')
            switched, scheduler_s = scheduler.result()
            caches_s = caches.result()[1]
        clock.mark('the rest beside')
        if switched:
            restarted.append('nova-scheduler')
        self.switch.set_agents(arm.on(arms_mod.AGENT))
        self.switch.set_manager(arm.on(arms_mod.POOL))
        clock.mark('agents and manager')
        print('reset for %s in %.0f s (%s; beside them: scheduler %.1f s, '
              'agents off and image caches %.1f s; restarted: %s)' % (
                  arm.name, clock.total(), clock.summary(), scheduler_s,
                  caches_s, ', '.join(restarted) or 'nothing'),
              file=sys.stderr, flush=True)

    def _empty_image_caches(self):
        self.switch.set_agents(False)
        aiostate.empty_image_caches(self.lay)

    def warm_up(self, arm):
        """An untimed request after the reset: the services' first use.

        One VM of the warm-up image of each boot kind, at once, by the
        arm's own launch path, no pool asked (no demand recorded); then
        the run's accounts start.
        """
        clock = cloud.Clock(quiet=True)
        image = workload_mod.Image('warmup', WARMUP_IMAGE_MIB
                                   * workload_mod.MIB)
        boots = [workload_mod.IMAGE] + ([workload_mod.VOLUME]
                                        if self.lay.settings.cinder else [])
        tasks = [workload_mod.Task(i, 0.0, image.name, 1, boot,
                                   WARMUP_STEPS) for i, boot in
                 enumerate(boots)]
        threads = [threading.Thread(
            target=self._start, args=(arm, task, self.warmup_image,
                                      boot_volume_gb(image, task.boot),
                                      False)) for task in tasks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        clock.mark('launches')
        aiostate.delete_servers(self.conn, [
            '^%s-' % prefix for prefix in (NAME_PREFIX, STOCK_PREFIX)])
        clock.mark('deletes')
        print('warm-up for %s in %.0f s (%s)'
              % (arm.name, clock.total(), clock.summary()),
              file=sys.stderr, flush=True)
        self.mark = aiocosts.LogMark(self.lay)
        self.cpu_mark = cpu.sample(self.lay)
        self._seen = set()
        self._copies = []
        self._cache_copies = aiocosts.CacheCopies()
        self._members_before = aiostate.member_seconds(
            self.store, self.pool_conf.mlaccel_pool)

    # launch ------------------------------------------------------------
    @staticmethod
    def _preload(arm):
        return list(clip.PRELOAD) if arm.on(arms_mod.TASKD) else []

    def launch(self, arm, workload, task):
        image = workload.image(task.image)
        gb = boot_volume_gb(image, task.boot)
        since = time.time()
        rec = self._start(arm, task, self.images[task.image], gb,
                          arm.on(arms_mod.POOL))
        rec['request']['args'] = dict(rec['request'].get('args') or {},
                                      **task.args())
        self._add_facts(arm, rec, task, image, since)
        return rec

    def _start(self, arm, task, image_id, gb, pooled):
        """Launch ``task`` by ``arm``'s path; its record."""
        if launcher_path(arm):
            return self._launch_mlaccel(arm, task, image_id, gb, pooled)
        return coldlaunch.ColdLaunch(
            self.conn, image_id, self.flavor_id, task.vms, task.args(),
            notification_url=self.lay.transport_url,
            conf=self.pool_conf, boot_volume_gb=gb,
            timeout=TASK_TIMEOUT, name_prefix=STOCK_PREFIX).run()

    def _launch_mlaccel(self, arm, task, image_id, gb, pooled):
        claimer = claims.Claimer(
            self.store, self.conn, project_id=self.project_id,
            timeout=self.pool_conf.mlaccel_pool.health_timeout,
            demand=self.demand) if pooled else None
        spec = api.LaunchSpec(
            image_id, self.flavor_id, task.vms,
            taskd_protocol.TaskSpec(
                'clip', task.args(), threads=1, seed=task.index),
            network='none', timeout=TASK_TIMEOUT)
        launch = api.Launch(
            self.conn, spec, listener=self.listener, conf=self.pool_conf,
            warm_pool=claimer, preload=self._preload(arm),
            notification_url=self.lay.transport_url,
            name_prefix=NAME_PREFIX)
        launch.servers.boot_volume_gb = gb
        return launch.run()

    # facts -------------------------------------------------------------
    def _hosts(self, since):
        """``{server id: compute host}`` of servers alive or deleted since."""
        compute = self.conn.compute
        found = {s.id: s.compute_host for s in compute.servers(
            details=True, all_projects=True)}
        stamp = time.strftime('%Y-%m-%dT%H:%M:%SZ',
                              time.gmtime(since - 5))
        found.update({s.id: s.compute_host for s in compute.servers(
            details=True, all_projects=True, deleted_only=True,
            changes_since=stamp)})
        return found

    def _add_facts(self, arm, rec, task, image, since):
        hosts = self._hosts(since)
        fetched = self.mark.fetched_by_compute()
        degraded = self.mark.degraded_volumes() if task.boot == \
            workload_mod.VOLUME else set()
        misses = self.mark.cinder_cache_misses() if task.boot == \
            workload_mod.VOLUME and arm.tuned(
                arms_mod.CINDER_IMAGE_CACHE) else {}
        image_id = self.images[task.image]
        for vm in rec['vms']:
            host = hosts.get(vm.get('server_id'))
            pooled = vm.get('pool') is not None
            facts = {'host': host, 'image': task.image,
                     'image_bytes': image.size, 'boot': task.boot,
                     'glance_bytes': 0, 'volume_copy': False,
                     'volume_clone': False}
            if pooled:
                pass
            elif task.boot == workload_mod.VOLUME:
                if arm.on(arms_mod.MIRROR):
                    clone = not degraded
                else:
                    clone = arm.tuned(arms_mod.CINDER_IMAGE_CACHE) and \
                        not self._cache_copies.copied(image_id, misses)
                facts.update(volume_clone=clone, volume_copy=not clone,
                             glance_bytes=0 if clone else image.size)
                if not clone:
                    with self._lock:
                        self._copies.append(image.size)
            else:
                with self._lock:
                    # The first build of the image on its host fetched it,
                    # if its compute logged a download in this run.
                    if (host, image_id) in fetched and \
                            (host, image_id) not in self._seen:
                        facts['glance_bytes'] = image.size
                    self._seen.add((host, image_id))
            vm['facts'] = facts

    # costs -------------------------------------------------------------
    def costs(self, arm):
        glance = sum(size for _host, _image, size in self.mark.fetches())
        copies = 0
        if self.lay.settings.cinder:
            _fills, fill_bytes = aiocosts.golden_fills(self.conn)
            # Each full copy of an image into a volume downloads it.
            with self._lock:
                copies = len(self._copies)
                glance += fill_bytes + sum(self._copies)
        idle = members = 0.0
        if arm.on(arms_mod.POOL):
            idle = aiostate.idle_seconds(self.store)
            # Members still building at the end count up to now.
            members = aiostate.member_seconds(
                self.store, self.pool_conf.mlaccel_pool, self.conn) - \
                self._members_before
        return {'glance_bytes': glance, 'volume_copies': copies,
                'pool_idle_vm_seconds': idle,
                'pool_member_vm_seconds': members,
                results_mod.CPU_COSTS: cpu.used(self.cpu_mark,
                                                cpu.sample(self.lay))}

    def restore(self):
        """Every mechanism on and no pool, as the cloud is brought up."""
        aiostate.forget_demand(self.store, self.project_id)
        self.switch.set_manager(False)
        aiostate.empty_pools(self.conn, self.store)
        # The manager as the cloud runs it: learning off.
        self.switch.manager_config_files = []
        self.switch.apply(arms_mod.MLACCEL)

    def close(self):
        if self.listener is not None:
            self.listener.stop()
        if self.store is not None and not (self.brought_up
                                           and not self.keep_cloud):
            self.restore()
        if self.store is not None and self.store.lock is not None:
            # Its tooz client's heartbeat would go on retrying against a
            # state bus taken down below.
            self.store.lock.stop()
        if self.brought_up and not self.keep_cloud:
            # Its volumes and images take tens of GB: only the logs stay
            # in a --base of the caller's.
            cloud.down(self.lay, purge=True, keep_logs=not self.purge)
