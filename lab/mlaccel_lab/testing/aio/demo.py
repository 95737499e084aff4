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

"""The demo: the example task on the all-in-one cloud, stock and mlaccel.

The life-cycle records of both launches side by side.

Each run launches the CLIP-style example task on ``count`` VMs through the
launcher, with an image no host has cached yet:

- *stock*: Nova's own scheduler (``mlaccel-config disable`` and a scheduler
  restart), and the task daemon preloading nothing, so each task imports
  torch cold;
- *mlaccel*: the scheduler plugins enabled (``mlaccel-config enable``), and
  the task daemon preloading torch and the task, so each task forks warm.

Each of ``rounds`` rounds launches both, alternating which goes first.
Every VM's boundaries come from Nova's versioned notifications (the
harness's nova.conf sends them) and taskd's clock. The cloud is brought up
first and taken down at the end, whatever happens.
"""

import json
import os
import statistics
import time

from mlaccel.cmd import config as mlaccel_config
from mlaccel.launcher import api
from mlaccel.launcher import record
from mlaccel import lifecycle
from mlaccel.tasks import clip
from mlaccel_lab.testing.aio import cloud
from mlaccel_lab.testing.aio import procs

STAGES = tuple(stage.value for stage in lifecycle.STAGES)
TASK = 'clip'


def set_scheduler(lay, conn, enabled):
    """Enable or disable mlaccel in nova.conf; restart nova-scheduler.

    Returns once the new scheduler reports in, so that its start-up is not
    counted in the next launch's scheduling stage.
    """
    argv = ['enable' if enabled else 'disable', '--nova-conf',
            lay.path('etc', 'nova', 'nova.conf')]
    if enabled:
        argv += ['--statebus-url', lay.statebus_url]
    if mlaccel_config.main(argv):
        raise procs.ServiceError('mlaccel-config %s failed' % argv[0])
    for controller in cloud.controllers(lay):
        procs.stop(lay, cloud.controller_service('nova-scheduler',
                                                 controller))
    since = time.time()
    for controller in cloud.controllers(lay):
        cloud.start_controller_service(lay, 'nova-scheduler', controller)
    cloud.wait_service_up(lay, conn, 'nova-scheduler', since)


def launch(lay, conn, variant, count, steps, image_bytes):
    """One launch of the example task; returns its record."""
    image = conn.image.create_image(
        name='mlaccel-demo-%s' % variant, data=os.urandom(image_bytes),
        disk_format='raw', container_format='bare')
    try:
        return api.launch(
            conn, image.id, lay.load_cloud()['flavor_id'], count, TASK,
            {'steps': steps, 'seed': 1}, network='none', timeout=900,
            listen_host='127.0.0.1', callback_host='127.0.0.1',
            taskd_port=0, notification_url=lay.transport_url,
            preload=list(clip.PRELOAD) if variant == 'mlaccel' else [],
            submit_options={'threads': 1, 'seed': 1})
    finally:
        conn.image.delete_image(image, ignore_missing=True)


def stage_table(records):
    """Median seconds per stage of each variant's task timelines."""
    lines = ['%-12s' % 'stage' + ''.join('%14s' % v for v in records)]
    for stage in STAGES + ('total',):
        row = '%-12s' % stage
        for runs in records.values():
            values = [(r['timeline']['durations'].get(stage)
                       if stage != 'total' else r['timeline']['total'])
                      for r in runs if r['outcome'] == api.SUCCEEDED]
            values = [v for v in values if v is not None]
            row += '%14s' % ('%.2f' % statistics.median(values)
                             if values else '-')
        lines.append(row)
    return '\n'.join(lines) + '\n'


def run(lay, count=2, steps=100, rounds=1, image_bytes=64 << 20,
        output=None):
    """Bring up, launch both variants ``rounds`` times, print, tear down."""
    records = {'stock': [], 'mlaccel': []}
    try:
        cloud.up(lay)
        conn = cloud.connect(lay)
        for index in range(rounds):
            # Alternate which arm goes first, so neither always meets a
            # cloud the other has just warmed.
            order = ('stock', 'mlaccel') if index % 2 == 0 \
                else ('mlaccel', 'stock')
            for variant in order:
                set_scheduler(lay, conn, variant == 'mlaccel')
                result = launch(lay, conn, variant, count, steps,
                                image_bytes)
                print('--- %s launch: %s' % (variant, result['outcome']))
                print(record.format_table(result))
                records[variant].append(result)
    finally:
        cloud.down(lay, purge=True)
    print('Median seconds per stage, %d VMs, %d round(s):' % (count, rounds))
    print(stage_table(records))
    if output:
        with open(output, 'w') as f:
            json.dump(records, f, indent=1, sort_keys=True)
    return 0 if all(r['outcome'] == api.SUCCEEDED
                    for runs in records.values() for r in runs) else 1
