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

"""The simulator's run at scale, with stated production parameters.

The production file (:data:`mlaccel_lab.experiment.workload.PRODUCTION` by
default; schema :data:`mlaccel_lab.experiment.schema.PRODUCTION`) states the
cluster (hosts, slots per host, scheduler workers), its bandwidths (host
links, Glance, Cinder backends), the costs that depend on a production site
(a hypervisor's build, a guest's boot, a production script's cold start,
one scheduling request at that size), the pool manager's options and the
flavors, and the workload at that scale: a stream replaying the arrival
process of the trace (:mod:`mlaccel_lab.experiment.trace`). Everything else
comes from the calibration measured on the mini-cloud. The pools are
learned, never prefilled (:class:`~mlaccel_lab.experiment.simulator.
Cluster`).

:func:`assumptions` lists every stated input beside its value,
:func:`sensitivity` reruns a shorter stream varying the guest's boot, the
images and the flavors, and :func:`write` keeps what a reader uses of the
runs (distributions, hit rates, costs), their records only on request.
"""

import dataclasses
import gzip
import json
import os
import random

import numpy

from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import protocol
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner
from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import simulator
from mlaccel_lab.experiment import stats
from mlaccel_lab.experiment import trace
from mlaccel_lab.experiment import workload as workload_mod

GBPS = 1e9 / 8
#: Tasks of each run of :func:`sensitivity`: a day of the stream.
SENSITIVITY_TASKS = 150
#: ``(parameter, values)`` :func:`sensitivity` varies; boot as a factor.
SENSITIVITY = (('guest boot time x', (0.5, 2.0)),
               ('images', (3, 10, 30)),
               ('flavors', (1, 4)))
QUANTILES = (0, 5, 10, 25, 50, 75, 90, 95, 99, 100)
DISTRIBUTIONS = 'at-scale-distributions.json'
RECORDS = 'at-scale-records.jsonl.gz'


def load(path=None):
    path = path or workload_mod.PRODUCTION
    data = schema.load(path, schema.PRODUCTION)
    name = os.path.basename(path)
    workload_mod.check_shape(data['workload'], name)
    most = len(trace.load()['flavor_share'])
    if data.get('flavors', 1) > most:
        raise schema.InvalidFile('%s: flavors: %d, more than the trace\'s '
                                 '%d' % (name, data['flavors'], most))
    return data


def for_production(calibration, production):
    """The calibration with the production file's stated parameters.

    Bandwidths, the cluster's size and the size-dependent stage costs come
    from ``production``; the preload keeps its measured ratio to the cold
    start, the plugins their measured ratio to stock scheduling; the rest
    (warm start, clone, step time unless the workload states one) is the
    calibration's.
    """
    stated = production.get('stage_costs', {})
    changes = {'hosts': production['hosts'],
               'sources': dict(calibration.sources)}
    for field in ('host_slots', 'scheduler_workers', 'volume_backends'):
        if field in production:
            changes[field] = production[field]
    for key, field in (('link_gbps', 'download_bandwidth'),
                       ('glance_gbps', 'glance_bandwidth'),
                       ('volume_copy_gbps', 'volume_copy_bandwidth')):
        if key in production:
            changes[field] = production[key] * GBPS
    if 'volume_copy_gbps' in production and calibration.fill_bandwidth:
        # The mirror's fill keeps its measured ratio to a copy.
        changes['fill_bandwidth'] = (
            calibration.fill_bandwidth / calibration.volume_copy_bandwidth
            * changes['volume_copy_bandwidth'])
    for field in ('build_seconds', 'guest_boot_seconds',
                  'cold_start_seconds'):
        if field in stated:
            changes[field] = float(stated[field])
    if 'cold_start_seconds' in stated and calibration.cold_start_seconds:
        changes['preload_seconds'] = (
            calibration.preload_seconds / calibration.cold_start_seconds
            * changes['cold_start_seconds'])
    if 'schedule_seconds' in stated:
        stock = calibration.schedule_seconds['stock']
        ratio = calibration.schedule_seconds['plugins'] / stock \
            if stock else 1.0
        changes['schedule_seconds'] = {
            'stock': stated['schedule_seconds'],
            'plugins': stated['schedule_seconds'] * ratio}
    step = production['workload']['task'].get('step_seconds')
    if step:
        changes['step_seconds'] = step
    for field in changes:
        if field != 'sources':
            changes['sources'][field] = 'stated (production)'
    if 'preload_seconds' in changes:
        changes['sources']['preload_seconds'] = \
            'stated cold start x measured preload/cold start'
    if 'schedule_seconds' in changes:
        changes['sources']['schedule_seconds'] = \
            'stated stock x measured plugins/stock'
    if 'fill_bandwidth' in changes:
        changes['sources']['fill_bandwidth'] = \
            'stated copy x measured fill/copy'
    if calibration.cpu_cores:
        # At scale each host's guests and each backend have cores of their
        # own: the all-in-one machine's shared cores are not modelled.
        changes['cpu_cores'] = changes['copy_cpu_seconds_per_gib'] = \
            changes['fill_cpu_seconds_per_gib'] = None
        changes['sources']['cpu_cores'] = 'not modelled at scale: cores ' \
            'of its own to each host and backend'
    return dataclasses.replace(calibration, **changes)


def _images(images, count):
    """``count`` images: the stated ones, then copies of them renamed."""
    return [dict(image, name='%s-%d' % (image['name'], i // len(images)),
                 hot=False) if i >= len(images) else image
            for i, image in ((i, images[i % len(images)])
                             for i in range(count))]


def workload(production, seed=None, tasks=None, images=None):
    """The production workload.

    :param tasks: overrides the stream's (or a fixed mix's) task count.
    :param images: how many images (default: the stated ones).
    """
    shape = dict(production['workload'])
    if images is not None:
        shape['images'] = _images(shape['images'], images)
    if tasks is not None and 'stream' in shape:
        shape['stream'] = dict(shape['stream'], tasks=tasks)
    elif tasks is not None:
        shape['tasks'] = dict(shape['tasks'], count=tasks)
        burst = sum(b['size'] for b in shape['arrivals'].get('bursts', ()))
        if burst > tasks:
            shape['arrivals'] = dict(shape['arrivals'], bursts=[])
    workload_mod.check_shape(shape, 'production workload')
    return workload_mod.generate(shape, seed)


def flavor_of(production, seed=0):
    """``callable(task) -> flavor``: the trace's most common ``flavors``.

    Drawn for each task in the trace's shares, by the task's index.
    """
    shares = sorted(trace.load()['flavor_share'].items(),
                    key=lambda item: -item[1])[:production.get('flavors', 1)]
    names, weights = zip(*shares)
    return lambda task: random.Random(seed * 1000003 + task.index).choices(
        names, weights)[0]


def run(calibration, production, arms, repetitions, seed=0, hosts=None,
        tasks=None, workload_seed=None, progress=True, images=None):
    """Simulate ``arms`` at scale; ``(results, production calibration)``.

    Learned pools with the stated ``pool_options``; ``images`` as in
    :func:`workload`.
    """
    scaled = for_production(calibration, production)
    if hosts is not None:
        scaled = dataclasses.replace(scaled, hosts=hosts)
    results = runner.execute(
        simrunner.SimulatedRunner(
            scaled, seed, pool_options=simulator.learned_options(
                **production.get('pool_options', {})),
            flavor_of=flavor_of(production, seed)),
        workload(production, seed=workload_seed, tasks=tasks,
                 images=images),
        arms, repetitions=repetitions, warmup=0, seed=seed,
        progress=progress)
    results['preconditions']['calibration'] = scaled.to_dict()
    results['preconditions']['pool_options'] = dict(
        production.get('pool_options', {}))
    return results, scaled


def assumptions(production, scaled):
    """``[(name, value, source)]``: every input of the run at scale.

    The stated ones (``stated``) and the calibration's (its source).
    """
    shape = production['workload']
    stream = shape.get('stream', {})
    options = simulator.learned_options(**production.get('pool_options', {}))
    stated = 'stated (production)'
    rows = [('hosts', scaled.hosts, stated),
            ('images', len(shape['images']), stated),
            ('image sizes (MiB)', ', '.join(
                str(i['size_mib']) for i in shape['images']), stated),
            ('image popularity', 'Zipf, exponent %s'
             % stream.get('zipf_exponent', 1.0), stated),
            ('flavors', production.get('flavors', 1),
             stated + ', shares of the trace'),
            ('arrivals', 'the trace\'s process x %s in time'
             % stream.get('time_scale'), stated + ': ' + trace.CITATION),
            ('tasks', stream.get('tasks'), stated),
            ('most VMs a task', stream.get('max_vms'), stated),
            ('boot from volume share', stream.get('boot_from_volume', 0.0),
             stated)]
    for name in ('budget_members', 'budget_idle_vm_hours', 'learn_max_size',
                 'interval', 'default_lead_time'):
        rows.append(('[mlaccel_pool] ' + name, getattr(options, name),
                     stated if name in production.get('pool_options', {})
                     else 'shipped default'))
    for name, value in sorted(scaled.to_dict().items()):
        if name not in ('sources', 'version', 'hosts') + \
                simulator.PREFILL_ONLY:
            rows.append((name, value, scaled.sources.get(
                name, 'calibration default')))
    if scaled.cpu_cores is None:
        rows.append(('cpu_cores', 'none', scaled.sources.get(
            'cpu_cores', 'calibration default: not modelled')))
    return rows


def _main_figures(results, arm=report.MAIN):
    reduction = stats.reductions(results).get(arm) or {}
    return ((reduction.get('overhead') or (None,))[0],
            report.hit_rate_pct(results, arm))


def sensitivity(calibration, production, arms=None, tasks=SENSITIVITY_TASKS,
                seed=0):
    """``[(parameter, value, overhead reduction %, hit rate %)]``.

    The stated run first (``'as stated'``), then each of
    :data:`SENSITIVITY` changed alone, on ``tasks`` tasks, the protocol's
    fewest repetitions of ``arms`` (stock and mlaccel by default). The
    reduction is of the median overhead against stock, the hit rate
    mlaccel's.
    """
    arms = arms or [arms_mod.STOCK, arms_mod.MLACCEL]
    costs = production.get('stage_costs', {})
    boot = costs.get('guest_boot_seconds', calibration.guest_boot_seconds)
    cases = [('as stated', '-', production, None)]
    for factor in SENSITIVITY[0][1]:
        cases.append((SENSITIVITY[0][0], factor, dict(
            production, stage_costs=dict(
                costs, guest_boot_seconds=boot * factor)), None))
    cases += [(SENSITIVITY[1][0], count, production, count)
              for count in SENSITIVITY[1][1]]
    cases += [(SENSITIVITY[2][0], count, dict(production, flavors=count),
               None) for count in SENSITIVITY[2][1]]
    rows = []
    for parameter, value, changed, images in cases:
        results, _ = run(calibration, changed, arms,
                         protocol.MIN_REPETITIONS, seed=seed,
                         tasks=tasks, progress=False, images=images)
        rows.append((parameter, value) + _main_figures(results))
    return rows


def _quantiles(values):
    if not values:
        return None
    found = numpy.percentile(values, QUANTILES)
    return {'p%d' % q: float(v) for q, v in zip(QUANTILES, found)}


def distributions(results):
    """``{arm: {...}}``: what a reader of the runs at scale uses.

    Per arm: the quantiles (:data:`QUANTILES`) and mean of each of
    :data:`~mlaccel_lab.experiment.results.ROW_FIELDS` over its tasks, the
    pools' hit rate and the costs per run.
    """
    out = {}
    for arm in results_mod.arm_names(results):
        rows = results_mod.task_rows(results, arm)
        out[arm] = {
            'tasks': len(rows),
            'fields': {field: dict(
                _quantiles([r[field] for r in rows]) or {},
                mean=float(numpy.mean([r[field] for r in rows]))
                if rows else None) for field in results_mod.ROW_FIELDS},
            'hit_rate_pct': report.hit_rate_pct(results, arm),
            'costs': results_mod.costs(results, arm)}
    return out


def write(results, directory, records=False):
    """Write the runs at scale to ``directory``; the paths written.

    Always :data:`DISTRIBUTIONS` (the runs' protocol, preconditions and
    workload shape, and :func:`distributions`); with ``records``, every
    run and record too, one JSON line each, gzipped (:data:`RECORDS`,
    read back by :func:`read_records`).
    """
    head = {key: value for key, value in results.items() if key != 'runs'}
    head['workload'] = {key: value for key, value in
                        results['workload'].items() if key != 'tasks'}
    paths = [os.path.join(directory, DISTRIBUTIONS)]
    schema.dump(dict(head, distributions=distributions(results)), paths[0])
    if records:
        paths.append(os.path.join(directory, RECORDS))
        with gzip.open(paths[1], 'wt') as out:
            out.write(json.dumps(dict(results, runs=[]),
                                 separators=(',', ':')) + '\n')
            for run_ in results['runs']:
                out.write(json.dumps(dict(run_, records=len(
                    run_['records'])), separators=(',', ':')) + '\n')
                for record in run_['records']:
                    out.write(json.dumps(record, separators=(',', ':'))
                              + '\n')
    return paths


def read_records(path):
    """The results dict :func:`write` wrote to ``path`` with records."""
    with gzip.open(path, 'rt') as lines:
        results = json.loads(next(lines))
        for line in lines:
            run_ = json.loads(line)
            run_['records'] = [json.loads(next(lines))
                               for _ in range(run_['records'])]
            results['runs'].append(run_)
    return results
