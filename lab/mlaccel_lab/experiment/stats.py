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

"""Summaries, reductions with bootstrap confidence intervals, contributions.

Reductions compare medians: ``100 × (1 − median(arm) / median(stock))``.
Their 95 % confidence interval is a paired percentile bootstrap over the
tasks both arms ran (the same workload task in the same repetition), so
that the tasks' own spread (small and large images, 1 to 4 VMs) is not
taken for noise.
"""

import numpy

from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import results as results_mod

BOOTSTRAP_SAMPLES = 4000
#: Resampled values held at once (memory bound for tens of thousands of
#: tasks).
_BATCH_VALUES = 2_000_000
CONFIDENCE = 0.95


def summary(values):
    """``{'n', 'mean', 'p50', 'p95'}`` of ``values`` (``None``s if empty)."""
    values = numpy.asarray(list(values), dtype=float)
    if not values.size:
        return {'n': 0, 'mean': None, 'p50': None, 'p95': None}
    return {'n': int(values.size), 'mean': float(values.mean()),
            'p50': float(numpy.percentile(values, 50)),
            'p95': float(numpy.percentile(values, 95))}


def paired(base_rows, rows, field):
    """Two aligned arrays of ``field`` over the keys both sets have."""
    base = {row['key']: row[field] for row in base_rows}
    other = {row['key']: row[field] for row in rows}
    keys = sorted(set(base) & set(other))
    return (numpy.array([base[k] for k in keys], dtype=float),
            numpy.array([other[k] for k in keys], dtype=float))


def reduction_pct(base, other):
    """Percent by which ``other``'s median is below ``base``'s."""
    return 100.0 * (1.0 - numpy.median(other) / numpy.median(base))


def bootstrap_reduction(base, other, samples=BOOTSTRAP_SAMPLES, seed=0):
    """``(reduction, low, high)``: paired percentile bootstrap CI.

    ``base[i]`` and ``other[i]`` are the same task under the two arms.
    """
    base = numpy.asarray(base, dtype=float)
    other = numpy.asarray(other, dtype=float)
    if base.shape != other.shape or not base.size:
        raise ValueError('need two non-empty arrays of the same length')
    rng = numpy.random.default_rng(seed)
    draws = []
    batch = max(1, _BATCH_VALUES // base.size)
    for start in range(0, samples, batch):
        picks = rng.integers(0, base.size,
                             size=(min(batch, samples - start), base.size))
        with numpy.errstate(divide='ignore', invalid='ignore'):
            draws.append(100.0 * (1.0 - numpy.median(other[picks], axis=1)
                                  / numpy.median(base[picks], axis=1)))
    draws = numpy.concatenate(draws)
    draws = draws[numpy.isfinite(draws)]
    tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
    low, high = numpy.percentile(draws, [tail, 100.0 - tail])
    return float(reduction_pct(base, other)), float(low), float(high)


def arm_table(results, arm):
    """Per stage, overhead and total: the :func:`summary` of ``arm``."""
    rows = results_mod.task_rows(results, arm)
    return {field: summary(row[field] for row in rows)
            for field in results_mod.STAGES + ('overhead', 'total')}


def reductions(results, base='stock', seed=0):
    """``{arm: {'total': (r, lo, hi), 'overhead': (r, lo, hi)}}``."""
    base_rows = results_mod.task_rows(results, base)
    out = {}
    for arm in results_mod.arm_names(results):
        if arm == base:
            continue
        rows = results_mod.task_rows(results, arm)
        out[arm] = {}
        for field in ('total', 'overhead'):
            b, o = paired(base_rows, rows, field)
            out[arm][field] = bootstrap_reduction(b, o, seed=seed) \
                if b.size else None
    return out


def running_share_pct(results, base='stock'):
    """The running stage's share of the stock total, in percent."""
    rows = results_mod.task_rows(results, base)
    total = sum(row['total'] for row in rows)
    return 100.0 * sum(row['running'] for row in rows) / total \
        if total else None


def contributions(results, base='stock', full='mlaccel'):
    """Each mechanism's share of the total, from the ablation arms.

    ``alone``: the reduction of the mechanism's ``only-`` arm against
    stock; ``lost_without``: how much of stock's median total comes back
    when it is left out (``without-`` arm against the full arm), in
    percent of stock's median total. Mechanisms whose arms did not run
    are absent.
    """
    names = set(results_mod.arm_names(results))
    median = {}

    def med(arm):
        if arm not in median:
            rows = results_mod.task_rows(results, arm)
            median[arm] = float(numpy.median([r['total'] for r in rows])) \
                if rows else None
        return median[arm]

    out = {}
    if base not in names or not med(base):
        return out
    for mechanism in arms_mod.MECHANISMS:
        alone = arms_mod.only(mechanism).name
        left = arms_mod.without(mechanism).name
        entry = {}
        if alone in names and med(alone) is not None:
            entry['alone'] = 100.0 * (1.0 - med(alone) / med(base))
        if left in names and full in names and med(left) is not None \
                and med(full) is not None:
            entry['lost_without'] = 100.0 * (med(left) - med(full)) \
                / med(base)
        if entry:
            out[mechanism] = entry
    return out
