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

"""How many steps the task needs to hold its share of the stock total.

The comparison is about tasks that compute: the workload's
``min_running_share`` says what share of the stock total the running stage
must hold. Running adds the same seconds to every arm, so it only grows
with the steps, while the pre-run overhead does not depend on them. The
simulator, with a calibration of the cloud, predicts the stock overhead;
:func:`plan` turns it into the steps needed, before spending an hour of
cloud time on a workload whose precondition will not be met.
"""

import dataclasses
import math

import numpy

from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import simulator


@dataclasses.dataclass(frozen=True)
class Plan:
    overhead: float
    share: float
    wanted: float
    steps: int


def plan(calibration, workload, runs=5, seed=0):
    """The :class:`Plan` of ``workload`` on the calibrated cloud.

    :returns: the mean simulated stock overhead per task, the running
        share the workload's steps give, the share wanted and the steps
        that give it (the workload's own when enough).
    """
    overheads = []
    for run in range(runs):
        out = simulator.Cluster(calibration, arms.STOCK, workload,
                                seed=seed + run).run()
        for record in out['records']:
            events = record['timeline']['events']
            overheads.append(events['started'] - events['requested'])
    overhead = float(numpy.mean(overheads))
    steps = workload.task_spec['steps']
    running = steps * calibration.step_seconds
    share = running / (running + overhead) if running + overhead else 0.0
    wanted = workload.task_spec.get('min_running_share', 0.0)
    needed = steps
    if share < wanted and calibration.step_seconds > 0:
        needed = math.ceil(wanted / (1.0 - wanted) * overhead
                           / calibration.step_seconds)
    return Plan(overhead, share, wanted, needed)
