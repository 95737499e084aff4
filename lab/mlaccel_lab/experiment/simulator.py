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

"""A discrete-event simulation (SimPy) of the task life cycle.

The same four stages as the records (:mod:`mlaccel.lifecycle`), with the
costs of a :class:`~mlaccel_lab.experiment.calibration.Calibration`:

- **scheduling**: each VM's request waits for one of the scheduler's
  workers, which takes ``schedule_seconds`` (``plugins`` with the
  scheduler plugins on). Stock Nova spreads (most free slots); the plugins
  drop hosts with as many builds in flight as their published build limit
  (BuildSlotFilter) and take the host :class:`mlaccel.costmodel.CostModel`
  predicts to start the task soonest (LifecycleWeigher), from what a host
  report would say: cached images, builds in flight, build limit.
- **creation**: a build slot of nova-compute (``build_limit``), then the
  image (a download from Glance into the host's cache unless cached or
  already coming: one download per image and host), or for a volume-backed
  VM a full copy of the image by its Cinder backend, or with mirror volumes
  a clone of the image's golden volume (copied once per backend), or
  with Cinder's own image-volume cache (``tuned-stock``) a clone of the
  image's cache entry once a first copy made it (the volumes arriving
  meanwhile wait on Cinder's lock of the image, then clone); then
  ``build_seconds``. Downloads and copies share the host's link, Glance's
  and the backend's bandwidth fairly (:mod:`.bandwidth`).
- **buffering**: the guest's boot, then a cold start of the task from
  user-data, or with taskd its preload and a warm start after its push.
- **running**: the task's steps.

Mechanisms: hot images are warm before the first arrival (the agent
pre-fetched them to every host, the mirror-volume driver made their golden
volumes: see :meth:`Cluster._prewarmed`); the agent publishes
``pacing_limit`` as its build limit; mirror volumes clone; taskd starts
warm; a member's daemon always preloads, and a claimed member
skips scheduling, creation, boot and preload. Warm pools are *learned*, as
the shipped pool manager learns them: each launch records its ask (and,
once its VMs are warm, the fresh overhead of those made fresh) in a demand
document with :mod:`mlaccel.pool.demand`'s functions; every ``interval``
of the ``[mlaccel_pool]`` options the simulated manager runs
:class:`mlaccel.pool.learning.Policy` on it (the code
``python -m mlaccel_lab.bench pools-demand`` replays), makes a pool for a
key the policy grants members, builds members (a fresh VM each: the
simulated lead time; at most ``refill_parallelism`` of a refill at once,
counted towards the pool while they build, as the shipped manager builds
them in the background) and retires idle ones the policy no longer wants.
It knows only what a manager would: nothing of the workload's future. With
``prefill`` (the old experiment "with foresight", not a default anywhere)
there is instead one pool per key of the workload, sized between the
workload's bounds by Little's law (:mod:`mlaccel.pool.sizing`) and filled
to its minimum before the first arrival.

A pool member costs from its create request to its claim, its retirement or
the run's end (``pool_member_vm_seconds``), and from its readiness to then
idle (``pool_idle_vm_seconds``).

Its output is launch records in the record schema, so every table and
chart is made from simulated runs as from measured ones
(:class:`mlaccel_lab.experiment.simrunner.SimulatedRunner` runs it as an
experiment runner).
"""

import random
import types

import simpy

from mlaccel import conf as mlaccel_conf
from mlaccel import costmodel
from mlaccel.launcher import record as record_mod
from mlaccel.pool import demand
from mlaccel.pool import learning
from mlaccel.pool import sizing
from mlaccel.pool import spec as pool_spec
from mlaccel_lab.bench import pools_demand
from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import bandwidth
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import workload as workload_mod


class Host:
    """A compute node, with what its host report would carry."""

    def __init__(self, env, index, calibration, build_limit):
        self.name = 'sim-host-%d' % index
        self.index = index
        self.free = calibration.host_slots
        self.cached_images = set()
        self.fetching = {}
        self.builds = simpy.Resource(env, capacity=calibration.build_limit)
        self.builds_in_flight = 0
        self.build_limit = build_limit
        self.build_throughput = 0
        self.fetch_bandwidth = calibration.download_bandwidth
        self.link = bandwidth.Link(calibration.download_bandwidth)


#: Calibration fields only ``prefill``'s Little's-law managers use.
PREFILL_ONLY = ('pool_interval', 'pool_window', 'pool_margin', 'pool_max')
#: The flavor of a task when the run is given no ``flavor_of``.
FLAVOR = 'flavor-1'
GIB = 1 << 30


def _shipped(name):
    return next(o.default for o in mlaccel_conf.pool.OPTS if o.name == name)


def learned_options(**stated):
    """The ``[mlaccel_pool]`` options the simulated manager learns with.

    The shipped defaults, learning on for the simulated project
    (:func:`mlaccel_lab.bench.pools_demand.pool_options`), with the
    ``stated`` ones (option name: value) over them.
    """
    return pools_demand.pool_options(
        stated.pop('budget_members', _shipped('budget_members')),
        stated.pop('budget_idle_vm_hours', _shipped('budget_idle_vm_hours')),
        **stated)


class _Pool:
    """One warm pool: its members and, for Little's law, its demand."""

    def __init__(self, spec, bounds=None):
        self.spec = spec
        self.image = spec.image_id
        self.boot = workload_mod.VOLUME if spec.boot_volume_gb \
            else workload_mod.IMAGE
        self.name = '%s/%s' % (self.image, self.boot) + (
            '' if spec.flavor_id == FLAVOR else '/' + spec.flavor_id)
        self.bounds = bounds
        #: ``(member, created, ready)`` of the idle members.
        self.idle = []
        #: When each member being built was asked for.
        self.building = []
        self.arrivals = []
        self.lead = None

    @property
    def alive(self):
        return len(self.idle) + len(self.building)


class Cluster:
    """One arm's run of a workload on a simulated cloud.

    :param pool_options: the ``[mlaccel_pool]`` options of the learned
        pools (:func:`learned_options`; the shipped defaults when ``None``).
    :param flavor_of: ``callable(task) -> flavor name`` (:data:`FLAVOR`
        for every task when ``None``): part of a pool's key.
    """

    def __init__(self, calibration, arm, workload, seed=0, label='sim',
                 records=True, prefill=False, pool_options=None,
                 flavor_of=None):
        self.cal = calibration
        self.prefill = prefill
        self.options = pool_options or learned_options()
        self.flavor_of = flavor_of or (lambda task: FLAVOR)
        self.demand = demand.empty(pools_demand.PROJECT)
        self.keep_records = records
        self.arm = arm
        self.workload = workload
        self.label = label
        self.rng = random.Random(seed)
        #: The manager's rounds' phase: drawn apart from the hosts' choices.
        self.phase = random.Random('rounds-%s' % seed)
        self.env = simpy.Environment()
        self.fluid = bandwidth.Fluid(self.env)
        limit = calibration.pacing_limit if arm.on(arms.AGENT) \
            else calibration.build_limit
        self.hosts = [Host(self.env, i, calibration, limit)
                      for i in range(calibration.hosts)]
        self.glance = bandwidth.Link(calibration.glance)
        self.backends = [bandwidth.Link(calibration.volume_copy_bandwidth)
                         for _ in range(calibration.volume_backends)]
        #: The one machine's cores every copy, cold start and preload
        #: shares (the all-in-one cloud); None: each has its own.
        self.cores = bandwidth.Link(calibration.cpu_cores, each=1.0) \
            if calibration.cpu_cores else None
        self.golden = {}
        #: ``(backend, image)`` of Cinder's image-volume cache entries.
        self.cinder_cache = {}
        self.scheduler = simpy.Resource(self.env,
                                        capacity=calibration.scheduler_workers)
        self.model = costmodel.CostModel(types.SimpleNamespace(
            mlaccel_costmodel=types.SimpleNamespace(
                default_fetch_bandwidth=calibration.download_bandwidth,
                default_image_size=max(i.size for i in workload.images),
                default_build_seconds=calibration.build_seconds,
                cold_start_seconds=calibration.cold_start_seconds,
                warm_start_seconds=calibration.warm_start_seconds)))
        self.costs = dict.fromkeys(results_mod.RUN_COSTS, 0)
        self.pools = {}
        self.records = []
        #: ``(facts, observed, pool)`` of every task VM, in end order.
        self.vms = []

    # Scheduling

    def _choose(self, image):
        """The host a request goes to, or ``None`` when none has room.

        Stock: one of the hosts with the most free slots. The plugins: of
        the hosts with a build slot left (all hosts with room if none has),
        one predicted to start the VM soonest, the freest among those. Ties
        go to a host drawn at random, as Nova's
        ``shuffle_best_same_weighed_hosts`` does.
        """
        if not self.arm.on(arms.SCHEDULER):
            hosts = [h for h in self.hosts if h.free > 0]
            if not hosts:
                return None
            most = max(h.free for h in hosts)
            return self.rng.choice([h for h in hosts if h.free == most])
        # The simulated hosts differ only in their builds, their room and
        # their cache: the cost model predicts each kind of host once,
        # not each of a thousand hosts per request.
        name = image.name
        kinds = {}
        for h in self.hosts:
            if h.free > 0:
                key = (h.builds_in_flight < h.build_limit,
                       name in h.cached_images, h.builds_in_flight,
                       h.build_limit, h.free, h.build_throughput,
                       h.fetch_bandwidth)
                alike = kinds.get(key)
                if alike is None:
                    kinds[key] = [h]
                else:
                    alike.append(h)
        if not kinds:
            return None
        keys = [k for k in kinds if k[0]] or list(kinds)
        request = costmodel.StartRequest(name, image.size)
        seconds = self.model.seconds_each([kinds[k][0] for k in keys],
                                          request)
        ranks = [(s, -k[4]) for s, k in zip(seconds, keys)]
        best = min(ranks)
        return self.rng.choice([h for rank, k in zip(ranks, keys)
                                if rank == best for h in kinds[k]])

    def _schedule(self, image):
        cost = self.cal.schedule_seconds[
            'plugins' if self.arm.on(arms.SCHEDULER) else 'stock']
        while True:
            with self.scheduler.request() as turn:
                yield turn
                yield self.env.timeout(cost)
                host = self._choose(image)
            if host is not None:
                host.free -= 1
                host.builds_in_flight += 1
                return host
            # No room: Nova would answer NoValidHost; a user retries.
            yield self.env.timeout(max(cost, 1.0))

    # Creation

    def _fetch(self, host, image):
        """Bring ``image`` into ``host``'s cache; bytes this call moved."""
        if image.name in host.cached_images:
            return 0
        coming = host.fetching.get(image.name)
        if coming is not None:
            yield coming
            return 0
        done = self.fluid.transfer(image.size, (host.link, self.glance))
        host.fetching[image.name] = done
        self.costs['glance_bytes'] += image.size
        yield done
        del host.fetching[image.name]
        host.cached_images.add(image.name)
        return image.size

    def _copy(self, backend, image, fill=False):
        """Copy ``image`` into a volume; ``fill``: the mirror's fill.

        The backend's link is its copy bandwidth; a fill goes at the
        fill's, which is its share of the same link scaled.
        """
        self.costs['glance_bytes'] += image.size
        self.costs['volume_copies'] += 1
        if fill:
            bandwidth, cpu = self.cal.fill
            per_byte = self.cal.volume_copy_bandwidth / bandwidth
        else:
            cpu, per_byte = self.cal.copy_cpu_seconds_per_gib, 1.0
        links = ((backend, per_byte), self.glance)
        if self.cores is not None and cpu:
            links += ((self.cores, cpu / GIB),)
        yield self.fluid.transfer(image.size, links)

    def _work(self, seconds):
        """``seconds`` of a guest's CPU-bound start, on the shared cores.

        Alone, it takes them on one core; beside other work, its share.
        """
        if self.cores is None:
            return self.env.timeout(seconds)
        return self.fluid.transfer(seconds, ((self.cores, 1.0),))

    def _volume(self, host, image):
        """Make the VM's volume; ``(copied, cloned)``."""
        backend = self.backends[host.index % len(self.backends)]
        if not self.arm.on(arms.MIRROR):
            if not self.arm.tuned(arms.CINDER_IMAGE_CACHE):
                yield from self._copy(backend, image)
                return True, False
            return (yield from self._cinder_cache(backend, image))
        copied = yield from self._golden(backend, image)
        yield self.env.timeout(self.cal.clone_seconds)
        return copied, True

    def _golden(self, backend, image):
        """Make ``image``'s golden volume on ``backend``, or wait for it.

        Returns whether this call copied it.
        """
        key = (id(backend), image.name)
        golden = self.golden.get(key)
        if golden is not None:
            yield golden
            return False
        golden = self.golden[key] = self.env.event()
        yield from self._copy(backend, image, fill=True)
        golden.succeed()
        return True

    def _cinder_cache(self, backend, image):
        """A volume by Cinder's own image-volume cache; ``(copied, cloned)``.

        As Cinder's volume manager does: a volume of an image with an entry
        on its backend is a clone of the entry; the first without copies
        the image from Glance and then clones itself into the entry, before
        it is available, holding Cinder's lock of the image meanwhile; the
        volumes of the image arriving then wait for the entry and clone it.
        """
        key = (id(backend), image.name)
        entry = self.cinder_cache.get(key)
        if entry is None:
            entry = self.cinder_cache[key] = self.env.event()
            yield from self._copy(backend, image)
            yield self.env.timeout(self.cal.clone_seconds)
            entry.succeed()
            return True, False
        yield entry
        yield self.env.timeout(self.cal.clone_seconds)
        return False, True

    def _create(self, host, image, boot):
        facts = {'host': host.name, 'image': image.name,
                 'image_bytes': image.size, 'boot': boot,
                 'glance_bytes': 0, 'volume_copy': False,
                 'volume_clone': False}
        with host.builds.request() as slot:
            yield slot
            if boot == workload_mod.IMAGE:
                facts['glance_bytes'] = yield from self._fetch(host, image)
            else:
                facts['volume_copy'], facts['volume_clone'] = \
                    yield from self._volume(host, image)
                facts['glance_bytes'] = image.size * facts['volume_copy']
            yield self.env.timeout(self.cal.build_seconds)
        host.builds_in_flight -= 1
        return facts

    # Buffering and running

    def _fresh_vm(self, image, boot, warm):
        """Schedule, create and boot a VM; its observations and facts.

        ``warm``: its task daemon preloads (taskd, or a pool member).
        """
        observed = {'requested': self.env.now}
        host = yield from self._schedule(image)
        observed['notified'] = {'scheduled': self.env.now}
        facts = yield from self._create(host, image, boot)
        observed['notified']['active'] = self.env.now
        yield self.env.timeout(self.cal.guest_boot_seconds)
        if warm:
            yield self._work(self.cal.preload_seconds)
            observed['ready_received'] = self.env.now
        return host, observed, facts

    def _vm(self, task, index, member, results, ready):
        """One VM of ``task``.

        ``ready`` succeeds once the VM is warm, as the launcher sees it,
        with its fresh overhead (None for a member).
        """
        image = self.workload.image(task.image)
        if member is None:
            host, observed, facts = yield from self._fresh_vm(
                image, task.boot, self.arm.on(arms.TASKD))
            start = self.env.timeout(self.cal.warm_start_seconds) \
                if self.arm.on(arms.TASKD) \
                else self._work(self.cal.cold_start_seconds)
            pool = None
        else:
            host, observed, facts, pool = member
            observed = {'claimed': self.env.now}
            start = self.env.timeout(self.cal.warm_start_seconds)
            ready.succeed(None)
        if pool is None and 'ready_received' in observed:
            ready.succeed(observed['ready_received'] - observed['requested'])
        yield start
        observed['first_step_at'] = self.env.now
        if not ready.triggered:   # no daemon: warm at its first step
            ready.succeed(self.env.now - observed['requested'])
        yield self.env.timeout(task.steps * self.cal.step_seconds)
        observed['finished_at'] = self.env.now
        host.free += 1
        self.vms.append((facts, observed, pool))
        results[index] = {'name': '%s-%d' % (task.index, index),
                          'observed': observed, 'facts': facts,
                          'pool': pool, 'state': 'DELETED'}

    def _task(self, task, done):
        yield self.env.timeout(task.at)
        arrival = self.env.now
        yield self.env.timeout(self.cal.waiting(self.arm))
        pooled = self.arm.on(arms.POOL)
        members = self._claim(task) if pooled else []
        vms = [None] * task.vms
        ready = [self.env.event() for _ in range(task.vms)]
        procs = [self.env.process(self._vm(
            task, i, members[i] if i < len(members) else None, vms,
            ready[i])) for i in range(task.vms)]
        if pooled and not self.prefill:
            self.env.process(self._record_fresh(task, ready))
        yield self.env.all_of(procs)
        if not self.keep_records:
            return
        request = {'image': task.image, 'count': task.vms, 'boot': task.boot,
                   'entry': self.workload.task_spec['entry'],
                   'args': {'steps': task.steps}}
        record = results_mod.annotate(record_mod.build(
            '%s-task-%d' % (self.label, task.index), request, vms,
            'succeeded'), task, arrival)
        self.records.append(record)
        done(record)

    def _record_fresh(self, task, ready):
        """As the launcher records it: once all the launch's VMs are warm."""
        overheads = yield self.env.all_of(ready)
        demand.add_fresh(self.demand, self._spec(task).key, [
            s for s in overheads.values() if s is not None])

    # Warm pools

    def _spec(self, task):
        """The :class:`~mlaccel.pool.spec.PoolSpec` ``task``'s VMs share."""
        size = self.workload.image(task.image).size
        return pool_spec.PoolSpec(
            pools_demand.PROJECT, task.image, self.flavor_of(task),
            boot_volume_gb=-(-size // GIB)
            if task.boot == workload_mod.VOLUME else None)

    def _claim(self, task):
        """Take idle members of ``task``'s pool; record the ask."""
        spec = self._spec(task)
        pool = self.pools.get(spec.key)
        taken = []
        if pool is not None:
            pool.arrivals.append([self.env.now, task.vms])
            taken = pool.idle[:task.vms]
            del pool.idle[:task.vms]
            for member in taken:
                self._release(member)
        if not self.prefill:
            demand.add_ask(self.demand, spec, task.vms, len(taken),
                           self.env.now)
            demand.prune(self.demand, self.env.now,
                         self.options.demand_records,
                         self.options.demand_max_age)
        return [member for member, _created, _ready in taken]

    def _release(self, member):
        """Count an idle member's costs until now (claimed or retired)."""
        _member, created, ready = member
        self.costs['pool_idle_vm_seconds'] += self.env.now - ready
        self.costs['pool_member_vm_seconds'] += self.env.now - created

    def _member(self, pool, slots=None):
        """Build one member of ``pool``, in one of ``slots`` if given."""
        image = self.workload.image(pool.image)
        began = self.env.now
        pool.building.append(began)
        if slots is None:
            host, observed, facts = yield from self._fresh_vm(
                image, pool.boot, True)
        else:
            with slots.request() as slot:
                yield slot
                host, observed, facts = yield from self._fresh_vm(
                    image, pool.boot, True)
        pool.building.remove(began)
        pool.lead = sizing.lead_time(pool.lead, self.env.now - began)
        pool.idle.append(((host, observed, facts, pool.name), began,
                          self.env.now))

    def _resize(self, pool, target, parallelism=None):
        """Build or retire members towards ``target`` alive; the builds.

        Only idle members are retired: one being built is let finish.
        ``parallelism``: at most this many of the builds at once.
        """
        slots = None if parallelism is None else simpy.Resource(
            self.env, capacity=parallelism)
        builds = [self.env.process(self._member(pool, slots))
                  for _ in range(target - pool.alive)]
        retired = pool.idle[:max(0, min(pool.alive - target,
                                        len(pool.idle)))]
        del pool.idle[:len(retired)]
        for member in retired:
            self._release(member)
            member[0][0].free += 1
        return builds

    def _learner(self):
        """The pool manager's learning, every ``interval`` of the options.

        Members alive (idle and being built) and measured lead times go to
        the policy with the demand recorded so far, as in the lab's replay;
        builds go on in the background, as the manager's do. The rounds
        keep the manager's own clock, not the workload's: the first comes
        at a time drawn (with the run's seed) within the first interval.
        """
        policy = learning.Policy(self.options, pools_demand.PROJECT,
                                 lambda image_id: True)
        yield self.env.timeout(self.phase.uniform(0.0,
                                                  self.options.interval))
        while True:
            _granted, targets = policy.targets(
                self.demand, self.env.now,
                {key: pool.alive for key, pool in self.pools.items()},
                {key: pool.lead for key, pool in self.pools.items()})
            for key, target in targets.items():
                if key not in self.pools and target > 0:
                    self.pools[key] = _Pool(demand.spec_of(self.demand, key))
            # As the manager records the day's spend: what each pool holds
            # or is being given.
            demand.add_spend(self.demand, self.env.now, sum(
                max(pool.alive, targets.get(key, 0))
                for key, pool in self.pools.items()))
            for key, target in sorted(targets.items()):
                if key in self.pools:
                    self._resize(self.pools[key], target,
                                 self.options.refill_parallelism)
            yield self.env.timeout(self.options.interval)

    def _default_lead(self, image):
        cal = self.cal
        return (cal.schedule_seconds['plugins'] + cal.build_seconds
                + image.size / cal.download_bandwidth
                + cal.guest_boot_seconds + cal.preload_seconds)

    def _pool_manager(self, pool):
        """Little's law between the workload's bounds (``prefill``)."""
        image = self.workload.image(pool.image)
        while True:
            now = self.env.now
            pool.arrivals = sizing.prune(pool.arrivals, now,
                                         self.cal.pool_window)
            rate = sizing.arrival_rate(pool.arrivals, now,
                                       self.cal.pool_window)
            lead = pool.lead if pool.lead is not None \
                else self._default_lead(image)
            target = sizing.target_size(rate, lead, self.cal.pool_margin,
                                        *pool.bounds)
            self._resize(pool, target)
            yield self.env.timeout(self.cal.pool_interval)

    # The run

    def _prefetch(self, host, images):
        for image in images:
            yield from self._fetch(host, image)

    def _prefilled(self):
        """One pool per key of the workload, filled to its minimum.

        Foresight: the keys and the bounds (:meth:`~mlaccel_lab.experiment.
        workload.Workload.pool_bounds`, flavors not told apart) are read
        from the workload, and the pools are full before the first arrival.
        """
        fills = []
        for task in self.workload.tasks:
            spec = self._spec(task)
            if spec.key not in self.pools:
                pool = self.pools[spec.key] = _Pool(
                    spec, self.workload.pool_bounds(task.image, task.boot))
                fills += self._resize(pool, pool.bounds[0])
        if fills:
            self.env.run(until=self.env.all_of(fills))
        for pool in self.pools.values():
            self.env.process(self._pool_manager(pool))

    def _prewarmed(self):
        """The hot images warm before the first arrival.

        Pre-fetched to every host by the agent, golden on every backend by
        the mirror-volume driver's pre-warm: what they do between a reset
        and the first task of a measured run (the untimed warm-up lasts
        longer), and what a cloud running for a while has.
        """
        hot = [image for image in self.workload.images if image.hot]
        warming = []
        if self.arm.on(arms.AGENT):
            warming += [self.env.process(self._prefetch(host, hot))
                        for host in self.hosts]
        if self.arm.on(arms.MIRROR):
            warming += [self.env.process(self._golden(backend, image))
                        for backend in self.backends for image in hot]
        if warming:
            self.env.run(until=self.env.all_of(warming))

    def run(self, done=lambda record: None):
        """Run every task; return ``{'records': [...], 'costs': {...}}``."""
        self._prewarmed()
        if self.arm.on(arms.POOL):
            if self.prefill:
                self._prefilled()
            else:
                self.env.process(self._learner())
        # Arrivals count from here (after the pre-warm, any pool's fill).
        tasks = [self.env.process(self._task(task, done))
                 for task in self.workload.tasks]
        self.env.run(until=self.env.all_of(tasks))
        for pool in self.pools.values():
            for member in pool.idle:
                self._release(member)
            self.costs['pool_member_vm_seconds'] += sum(
                self.env.now - began for began in pool.building)
        return {'records': self.records, 'costs': dict(self.costs)}
