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

"""Summaries, reductions and seconds saved with confidence intervals.

Reductions compare medians: ``100 × (1 − median(arm) / median(stock))``;
seconds saved are the mean over tasks of ``stock − arm``. Both pair the
tasks the two arms ran (the same workload task in the same repetition),
so that the tasks' own spread (small and large images, 1 to 4 VMs) is not
taken for noise. Their 95 % confidence interval is a percentile cluster
bootstrap by run: each draw takes repetitions with replacement, and every
pair of a drawn repetition as many times as it was drawn, because tasks
of one run share its state (caches, pools, load) and are not independent.
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
    """``(base, other, runs)``: ``field`` over the keys both sets have.

    Three aligned arrays; ``runs`` holds each pair's repetition.
    """
    base = {row['key']: row[field] for row in base_rows}
    other = {row['key']: row[field] for row in rows}
    keys = sorted(set(base) & set(other))
    return (numpy.array([base[k] for k in keys], dtype=float),
            numpy.array([other[k] for k in keys], dtype=float),
            numpy.array([k[0] for k in keys]))


def reduction_pct(base, other):
    """Percent by which ``other``'s median is below ``base``'s."""
    return 100.0 * (1.0 - numpy.median(other) / numpy.median(base))


def _weights(runs, samples, rng):
    """Batches of draws: per draw (row), how often each pair is taken.

    A pair is taken as often as its run was drawn: whole runs or nothing.
    """
    labels, index = numpy.unique(runs, return_inverse=True)
    uniform = numpy.full(labels.size, 1.0 / labels.size)
    batch = max(1, _BATCH_VALUES // index.size)
    for start in range(0, samples, batch):
        counts = rng.multinomial(labels.size, uniform,
                                 size=min(batch, samples - start))
        yield counts[:, index]


def cluster_bootstrap(statistic, runs, samples=BOOTSTRAP_SAMPLES, seed=0):
    """``(low, high)``: percentile interval of ``statistic`` over draws.

    :param statistic: maps a ``(draws, pairs)`` array of weights (see
        :func:`_weights`) to the statistic of each draw.
    :param runs: each pair's run; every pair its own run gives the plain
        (row) bootstrap.
    """
    rng = numpy.random.default_rng(seed)
    with numpy.errstate(divide='ignore', invalid='ignore'):
        draws = numpy.concatenate([statistic(w) for w in
                                   _weights(runs, samples, rng)])
    draws = draws[numpy.isfinite(draws)]
    tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
    low, high = numpy.percentile(draws, [tail, 100.0 - tail])
    return float(low), float(high)


def weighted_medians(values, weights):
    """Per row of ``weights``: the median of the weighted ``values``.

    As :func:`numpy.median` of each value repeated as often as its weight.
    """
    order = numpy.argsort(values)
    values = numpy.asarray(values)[order]
    taken = numpy.cumsum(weights[:, order], axis=1)
    total = taken[:, -1:]
    # The value at position p of the repeated, sorted values is the first
    # whose running count exceeds p.
    low = (taken <= (total - 1) // 2).sum(axis=1)
    high = (taken <= total // 2).sum(axis=1)
    return (values[low] + values[high]) / 2.0


def _checked(base, other, runs):
    base = numpy.asarray(base, dtype=float)
    other = numpy.asarray(other, dtype=float)
    runs = numpy.arange(base.size) if runs is None else numpy.asarray(runs)
    if not base.size or not base.shape == other.shape == runs.shape:
        raise ValueError('need non-empty arrays of the same length')
    return base, other, runs


def bootstrap_reduction(base, other, runs=None, samples=BOOTSTRAP_SAMPLES,
                        seed=0):
    """``(reduction, low, high)``: :func:`reduction_pct`, cluster bootstrap.

    ``base[i]`` and ``other[i]`` are the same task under the two arms, in
    run ``runs[i]`` (each pair its own run if ``None``).
    """
    base, other, runs = _checked(base, other, runs)

    def statistic(weights):
        return 100.0 * (1.0 - weighted_medians(other, weights)
                        / weighted_medians(base, weights))

    return (float(reduction_pct(base, other)),
            *cluster_bootstrap(statistic, runs, samples, seed))


def bootstrap_saved(base, other, runs=None, samples=BOOTSTRAP_SAMPLES,
                    seed=0):
    """``(mean, low, high)`` of ``base − other``, cluster bootstrap."""
    base, other, runs = _checked(base, other, runs)
    saved = base - other
    return (float(saved.mean()),
            *cluster_bootstrap(lambda w: w @ saved / w.sum(axis=1), runs,
                               samples, seed))


def arm_table(results, arm):
    """Per :data:`~results.ROW_FIELDS`: the :func:`summary` of ``arm``."""
    rows = results_mod.task_rows(results, arm)
    return {field: summary(row[field] for row in rows)
            for field in results_mod.ROW_FIELDS}


def _against(results, base, field, estimate, seed):
    """``{arm: estimate(base, other, runs, seed=seed)}`` on ``field``.

    ``None`` for an arm without a task paired with ``base``'s.
    """
    base_rows = results_mod.task_rows(results, base)
    out = {}
    for arm in results_mod.arm_names(results):
        if arm != base:
            pairs = paired(base_rows, results_mod.task_rows(results, arm),
                           field)
            out[arm] = estimate(*pairs, seed=seed) if pairs[0].size \
                else None
    return out


def reductions(results, base='stock', seed=0):
    """``{arm: {'total': (r, lo, hi), 'overhead': (r, lo, hi)}}``."""
    found = {field: _against(results, base, field, bootstrap_reduction, seed)
             for field in ('total', 'overhead')}
    return {arm: {field: found[field][arm] for field in found}
            for arm in found['total']}


def saved_seconds(results, base='stock', seed=0):
    """``{arm: (mean, lo, hi)}``: overhead seconds saved per task."""
    return _against(results, base, 'overhead', bootstrap_saved, seed)


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
