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

"""The interface a runner implements, and the loop that drives one.

A :class:`Runner` runs one arm's workload on a cloud (the all-in-one cloud,
a real one) or a model of one (:class:`mlaccel_lab.experiment.simulator.
SimulatedRunner`). :func:`execute` asks it to prepare once, then for each
run of the protocol to reset the cloud and configure the arm, then to run
the workload; it shows a progress bar per run and gathers everything into
the experiment's results (:mod:`mlaccel_lab.experiment.results`).
:class:`TaskRunner` does the timing and threading for a runner whose
tasks are blocking launches (a cloud's).
"""

import abc
import threading
import time

from oslo_log import log as logging
import tqdm

from mlaccel.launcher import record
from mlaccel_lab.experiment import protocol
from mlaccel_lab.experiment import results as results_mod

LOG = logging.getLogger(__name__)
#: Precondition a runner states: whether, before every run of an arm with
#: pools, it fills each pool to the workload's peak (foresight: the
#: simulator's model of operator-sized pools does; the all-in-one runner
#: never does, its pools are learned).
POOLS_PREFILLED = 'pools_prefilled_to_peak'


class RunnerError(Exception):
    """The cloud the arms run on could not be made ready (one message)."""


class Runner(abc.ABC):
    """Runs an arm's workload; :func:`execute` calls it in this order.

    ``prepare`` once, then for each run ``reset(arm)``, ``warm_up(arm)``
    and ``run(arm, workload, done)``, and ``close`` at the end, whatever
    happened.
    """

    #: Shown in the results: what ran the arms ('aio', 'simulator'...).
    kind = None
    #: Whether the records are measured (False for a model).
    measured = True

    @classmethod
    def add_arguments(cls, parser):
        """Add the runner's own command-line options to ``parser``."""

    @classmethod
    def from_options(cls, options):
        """The runner the parsed command-line ``options`` ask for."""
        return cls()

    def prepare(self, workload):
        """Once before any run: upload the images, create flavors...

        :returns: a dict of the facts the run depends on (host count,
            hypervisor, image sizes...), stored in the results and printed.
        """
        return {}

    @abc.abstractmethod
    def reset(self, arm):
        """Bring the cloud to the state every run starts from, for ``arm``.

        Empty every image cache (Nova's ``_base`` on each compute, what the
        agent pre-fetched), Cinder's image-volume cache and golden volumes,
        delete every pool member; then configure the arm's mechanisms
        (:class:`mlaccel_lab.experiment.arms.Arm`): scheduler plugins in
        nova.conf, the agent, the mirror-volume driver in cinder.conf,
        taskd preload and push or a cold start from user-data, pools.
        """

    def warm_up(self, arm):
        """After each reset: an untimed request, the services' first use.

        It must leave no trace the run could profit from (no cache of the
        workload's images, no recorded demand).
        """

    @abc.abstractmethod
    def run(self, arm, workload, done):
        """Run every task of ``workload``; return the run's outcome.

        Launch each task (:class:`mlaccel_lab.experiment.workload.Task`) at
        ``task.at`` seconds after the start, tasks overlapping as they
        arrive, and call ``done(record)`` as each ends.

        :returns: ``{'records': [...], 'costs': {...}}``: one launch record
            (:mod:`mlaccel.launcher.record`) per task, annotated with
            :func:`mlaccel_lab.experiment.results.annotate`, and the run's
            costs (:data:`mlaccel_lab.experiment.results.RUN_COSTS`).
        """

    def close(self):
        """After the last run (or a failure): release what prepare made."""


class TaskRunner(Runner):
    """A runner whose tasks are blocking launches, one thread each.

    :meth:`run` starts each task's :meth:`launch` in a thread of its own at
    the task's arrival time (``task.at × time_scale`` seconds after the
    start), so tasks overlap as they arrive; it waits for all, turns a
    launch that raised into a ``failed`` record (the other tasks go on),
    and asks :meth:`costs` for the run's costs. A cloud runner implements
    :meth:`reset`, :meth:`launch` and :meth:`costs`. Plain ``threading``:
    works on native threads and under eventlet monkey patching.
    """

    #: Wall-clock seconds per workload second (0: every task at once).
    time_scale = 1.0

    @abc.abstractmethod
    def launch(self, arm, workload, task):
        """Launch ``task`` under ``arm``, wait for its end; its record.

        Typically :func:`mlaccel.launcher.api.launch` with the task's
        image, VM count and boot kind, with each VM's ``facts`` added
        (:data:`mlaccel_lab.experiment.results.VM_FACTS`).
        """

    def costs(self, arm):
        """The run's :data:`~mlaccel_lab.experiment.results.RUN_COSTS`."""
        return {}

    def run(self, arm, workload, done):
        records = {}
        lock = threading.Lock()
        clock = time.monotonic
        start = clock()
        wall_start = time.time()

        def one(task):
            arrival = wall_start + task.at * self.time_scale
            try:
                rec = self.launch(arm, workload, task)
            except Exception as exc:
                LOG.exception('Task %d of arm %s failed', task.index,
                              arm.name)
                rec = record.build(
                    'experiment-%s-%d' % (arm.name, task.index),
                    {'image': task.image, 'count': task.vms,
                     'args': {'steps': task.steps}}, [], 'failed',
                    error='%s: %s' % (type(exc).__name__, exc))
            results_mod.annotate(rec, task, arrival)
            with lock:
                records[task.index] = rec
            done(rec)

        threads = []
        for task in sorted(workload.tasks, key=lambda t: t.at):
            delay = start + task.at * self.time_scale - clock()
            if delay > 0:
                time.sleep(delay)
            thread = threading.Thread(target=one, args=(task,),
                                      name='experiment-task-%d' % task.index)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        return {'records': [records[t.index] for t in workload.tasks],
                'costs': dict(self.costs(arm) or {})}


def execute(runner, workload, arms, repetitions=protocol.MIN_REPETITIONS,
            warmup=1, seed=0, progress=True, on_run=None):
    """Run the protocol with ``runner``; return the results dict.

    ``on_run(results)``, if given, is called after each run with the
    results so far (to save them: an interrupted experiment keeps the runs
    it finished).
    """
    runs = protocol.schedule(arms, repetitions, warmup, seed)
    out = results_mod.new(runner, workload, arms, repetitions, warmup, seed)
    try:
        out['preconditions'] = dict(runner.prepare(workload) or {})
        for run in runs:
            made = workload.warmup() if run.warmup else workload
            runner.reset(run.arm)
            runner.warm_up(run.arm)
            label = '%srep %d%s %s' % (
                '' if runner.measured else 'SIMULATED ', run.repetition,
                ' (warm-up)' if run.warmup else '', run.arm.name)
            with tqdm.tqdm(total=len(made.tasks), desc=label,
                           unit='task', disable=not progress,
                           leave=True) as bar:
                outcome = runner.run(run.arm, made,
                                     lambda record: bar.update(1))
            out['runs'].append(results_mod.run_entry(run, outcome, made))
            if on_run is not None:
                on_run(out)
    finally:
        runner.close()
    return out
