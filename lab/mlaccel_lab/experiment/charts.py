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

"""PNG charts of an experiment: stacked stages, time to first step.

Drawn on :class:`matplotlib.figure.Figure` objects of their own (no
pyplot, no global state), so any thread may draw.
"""

import os

from matplotlib import figure
import numpy

from mlaccel_lab.experiment import results as results_mod

COLOURS = {'scheduling': '#4c72b0', 'creation': '#dd8452',
           'buffering': '#c44e52', 'running': '#55a868'}


def stacked_stages(summary, path, title):
    """One bar per arm: its mean stages stacked, total on top."""
    arms = summary['arms']
    fig = figure.Figure(figsize=(max(6.0, 0.8 * len(arms) + 2), 4.5))
    ax = fig.subplots()
    bottom = numpy.zeros(len(arms))
    for stage in results_mod.STAGES:
        heights = numpy.array([summary['tables'][arm][stage]['mean'] or 0.0
                               for arm in arms])
        ax.bar(arms, heights, bottom=bottom, label=stage,
               color=COLOURS[stage])
        bottom += heights
    ax.set_ylabel('mean seconds per task')
    ax.set_title(title)
    ax.legend(loc='upper right', fontsize='small')
    ax.tick_params(axis='x', labelrotation=45, labelsize='small')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def first_step(results, path, title):
    """Each arm's distribution (ECDF) of the time to first step."""
    fig = figure.Figure(figsize=(7.0, 4.5))
    ax = fig.subplots()
    for arm in results_mod.arm_names(results):
        values = numpy.sort([row['overhead'] for row in
                             results_mod.task_rows(results, arm)])
        if values.size:
            ax.step(values, numpy.arange(1, values.size + 1) / values.size,
                    where='post', label=arm)
    ax.set_xlabel('seconds from request to first training step')
    ax.set_ylabel('share of tasks')
    ax.set_title(title)
    ax.legend(loc='lower right', fontsize='small')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def write(results, summary, directory, prefix, title):
    """Both charts into ``directory``; their paths."""
    os.makedirs(directory, exist_ok=True)
    return [
        stacked_stages(summary, os.path.join(
            directory, prefix + '-stages.png'), title),
        first_step(results, os.path.join(
            directory, prefix + '-first-step.png'), title)]
