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
one scheduling request at that size) and the workload's shape at that
scale. Everything else comes from the calibration measured on the
mini-cloud.
"""

import dataclasses
import os

from mlaccel_lab.experiment import runner
from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import simrunner
from mlaccel_lab.experiment import workload as workload_mod

GBPS = 1e9 / 8


def load(path=None):
    path = path or workload_mod.PRODUCTION
    data = schema.load(path, schema.PRODUCTION)
    workload_mod.check_shape(data['workload'], os.path.basename(path))
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
    for field in ('host_slots', 'scheduler_workers', 'volume_backends',
                  'pool_max'):
        if field in production:
            changes[field] = production[field]
    for key, field in (('link_gbps', 'download_bandwidth'),
                       ('glance_gbps', 'glance_bandwidth'),
                       ('volume_copy_gbps', 'volume_copy_bandwidth')):
        if key in production:
            changes[field] = production[key] * GBPS
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
    return dataclasses.replace(calibration, **changes)


def workload(production, seed=None, tasks=None):
    """The production workload; ``tasks`` overrides its task count."""
    shape = dict(production['workload'])
    if tasks is not None:
        shape['tasks'] = dict(shape['tasks'], count=tasks)
        burst = sum(b['size'] for b in shape['arrivals'].get('bursts', ()))
        if burst > tasks:
            shape['arrivals'] = dict(shape['arrivals'], bursts=[])
        workload_mod.check_shape(shape, 'production workload')
    return workload_mod.generate(shape, seed)


def run(calibration, production, arms, repetitions, seed=0, hosts=None,
        tasks=None, workload_seed=None, progress=True):
    """Simulate ``arms`` at scale; ``(results, production calibration)``."""
    scaled = for_production(calibration, production)
    if hosts is not None:
        scaled = dataclasses.replace(scaled, hosts=hosts)
    results = runner.execute(
        simrunner.SimulatedRunner(scaled, seed), workload(
            production, seed=workload_seed, tasks=tasks), arms,
        repetitions=repetitions, warmup=0, seed=seed, progress=progress)
    results['preconditions']['calibration'] = scaled.to_dict()
    return results, scaled
