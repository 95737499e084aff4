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

"""The experiment's report: tables, the summary JSON and the RESULT line.

The headline does not depend on how long a task trains: the time from a
task's arrival to its first training step (the pre-run overhead), the
seconds saved per task, the pools' hit rate and what their members cost
per second saved. The total reduction is then given for lifetimes drawn
from the trace the stream comes from, and for fixed training times
(:data:`LENGTHS`).
"""

import math

import numpy

from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import stats

GIB = float(1 << 30)
#: The arm whose figures make the RESULT line.
MAIN = 'mlaccel'
#: Training seconds the total reduction is also given at: the old
#: experiment's task, the trace's median lifetime, an hour.
LENGTHS = (32.0, 540.0, 3600.0)


def _rows_by_key(results, arm):
    return {row['key']: row for row in results_mod.task_rows(results, arm)}


def at_lengths(results, arm, base='stock', lengths=LENGTHS):
    """``{seconds: %}``: the total reduction with that much training.

    The mean overhead saved per task over stock's mean overhead plus the
    training time.
    """
    base_rows, rows = _rows_by_key(results, base), _rows_by_key(results, arm)
    keys = sorted(set(base_rows) & set(rows))
    if not keys:
        return {}
    stock = numpy.mean([base_rows[k]['overhead'] for k in keys])
    saved = numpy.mean([base_rows[k]['overhead'] - rows[k]['overhead']
                        for k in keys])
    return {length: float(100.0 * saved / (stock + length))
            for length in lengths}


def at_trace_lengths(results, arm, base='stock'):
    """The median per-task total reduction, training for trace lifetimes.

    Each task trains for its lifetime in the trace; ``None`` if the tasks
    have none.
    """
    lifetimes = {t['index']: t.get('lifetime')
                 for t in results['workload']['tasks']}
    base_rows, rows = _rows_by_key(results, base), _rows_by_key(results, arm)
    found = []
    for key in sorted(set(base_rows) & set(rows)):
        life = lifetimes.get(key[1])
        if life is None:
            continue
        found.append(100.0 * (1.0 - (rows[key]['overhead'] + life)
                              / (base_rows[key]['overhead'] + life)))
    return float(numpy.median(found)) if found else None


def hit_rate_pct(results, arm):
    """Percent of the arm's VMs that were warm pool members."""
    rows = [row for row in results_mod.vm_rows(results)
            if row['arm'] == arm]
    if not rows:
        return None
    return 100.0 * sum(row['pooled'] for row in rows) / len(rows)


def member_s_per_saved_s(results, arm, saved):
    """Pool members' VM-seconds (build to deletion) per second saved.

    :param saved: the arm's mean seconds saved per task; ``None`` unless
        it saved some.
    """
    cost = results_mod.costs(results, arm).get('pool_member_vm_seconds')
    runs = results_mod.kept_runs(results, arm)
    if not runs or cost is None or saved is None or saved <= 0:
        return None
    tasks = numpy.mean([len(run['records']) for run in runs])
    return float(cost / (saved * tasks))


def summarize(results, seed=0):
    """Everything the report shows, as a JSON-able dict."""
    names = results_mod.arm_names(results)
    saved = stats.saved_seconds(results, seed=seed)
    main_saved = (saved.get(MAIN) or (None,))[0]
    return {
        'runner': results['runner'], 'measured': results['measured'],
        'arms': names,
        'tables': {arm: stats.arm_table(results, arm) for arm in names},
        'failures': {arm: results_mod.failures(results, arm)
                     for arm in names},
        'dropped': {arm: results_mod.dropped(results, arm)
                    for arm in names},
        'reductions': stats.reductions(results, seed=seed),
        'saved_s_per_task': saved,
        'hit_rate_pct': {arm: hit_rate_pct(results, arm) for arm in names},
        'at_lengths': {arm: at_lengths(results, arm) for arm in names
                       if arm != 'stock'},
        'at_trace_lengths': {arm: at_trace_lengths(results, arm)
                             for arm in names if arm != 'stock'},
        'member_s_per_saved_s': member_s_per_saved_s(results, MAIN,
                                                     main_saved),
        'contributions': stats.contributions(results),
        'costs': {arm: results_mod.costs(results, arm) for arm in names},
        'preconditions': results.get('preconditions', {}),
    }


def _num(value, spec='%.2f'):
    return '-' if value is None else spec % value


def format_summary(summary, title):
    """The text report of a :func:`summarize` dict."""
    lines = ['== %s (%s%s) ==' % (
        title, summary['runner'],
        '' if summary['measured'] else ', SIMULATED: not measured')]
    lines.append('%-20s %-11s %5s %9s %9s %9s' % (
        'arm', 'stage', 'n', 'mean s', 'p50 s', 'p95 s'))
    for arm in summary['arms']:
        for field in results_mod.ROW_FIELDS:
            cell = summary['tables'][arm][field]
            lines.append('%-20s %-11s %5d %9s %9s %9s' % (
                arm, field, cell['n'], _num(cell['mean']),
                _num(cell['p50']), _num(cell['p95'])))
        for reason, count in sorted(summary['dropped'][arm].items()):
            lines.append('%-20s %d record(s) left out: %s'
                         % (arm, count, reason))
    lines.append('')
    lines.append('Against stock: overhead (arrival to first step) and total, '
                 'median reduction %; seconds saved per task, mean; 95 % CI '
                 'by run (cluster bootstrap):')
    lines.append('%-20s %-22s %-22s %-22s %8s' % (
        'arm', 'overhead %', 'total %', 'saved s/task', 'hits %'))
    for arm, found in summary['reductions'].items():
        lines.append('%-20s %-22s %-22s %-22s %8s' % (
            arm, _ci(found['overhead']), _ci(found['total']),
            _ci(summary['saved_s_per_task'].get(arm)),
            _num(summary['hit_rate_pct'].get(arm), '%.1f')))
    if summary['at_lengths']:
        lines.append('')
        lines.append('Total reduction %% with the task training for: %s; '
                     'and for its lifetime in the trace (median over tasks)'
                     % ', '.join('%.0f s' % length for length in LENGTHS))
        for arm, found in summary['at_lengths'].items():
            lines.append('%-20s %s   %s' % (
                arm, '  '.join('%8s' % _num(found.get(length), '%.1f')
                               for length in LENGTHS),
                _num(summary['at_trace_lengths'].get(arm), '%.1f')))
    if summary['contributions']:
        lines.append('')
        lines.append('Each mechanism, % of stock\'s median total:')
        lines.append('%-12s %8s %14s' % ('mechanism', 'alone',
                                         'lost without'))
        for mechanism, found in summary['contributions'].items():
            lines.append('%-12s %8s %14s' % (
                mechanism, _num(found.get('alone'), '%.1f'),
                _num(found.get('lost_without'), '%.1f')))
    lines.append('')
    lines.append('Costs per run: %-7s %14s %14s %12s %13s' % (
        '', 'member VM-s', 'idle VM-s', 'GiB Glance', 'volume copies'))
    for arm, cost in summary['costs'].items():
        if cost:
            lines.append('%-22s %14.1f %14.1f %12.2f %13.1f' % (
                arm, cost.get('pool_member_vm_seconds', 0.0),
                cost['idle_vm_seconds'], cost['glance_bytes'] / GIB,
                cost['volume_copies']))
    lines.append('Pool members\' VM-seconds (create request to deletion or '
                 'the run\'s end) per task-second saved, %s: %s'
                 % (MAIN, _num(summary['member_s_per_saved_s'])))
    cpu = {arm: cpu_groups(cost[results_mod.CPU_COSTS])
           for arm, cost in summary['costs'].items()
           if results_mod.CPU_COSTS in (cost or {})}
    if cpu:
        lines.append('')
        lines.append('CPU seconds per run, by part (all share the machine\'s '
                     'cores):')
        lines.append('%-20s' % 'arm'
                     + ''.join('%10s' % g for g in CPU_GROUPS))
        for arm, groups in cpu.items():
            lines.append('%-20s' % arm + ''.join(
                '%10.1f' % groups[g] for g in CPU_GROUPS))
    return '\n'.join(lines) + '\n'


#: The CPU table's columns: the machine's total, the guests, the services
#: of these projects (by name prefix), and the rest of the total (the other
#: services, the experiment itself, the kernel).
CPU_GROUPS = ('total', 'guests', 'nova', 'cinder', 'keystone', 'mlaccel',
              'other')


def cpu_groups(parts):
    """A run's CPU seconds by part, summed into :data:`CPU_GROUPS`."""
    groups = dict.fromkeys(CPU_GROUPS, 0.0)
    for part, seconds in parts.items():
        group = part if part in ('total', 'guests') else part.split('-')[0]
        if group in groups and group != 'other':
            groups[group] += seconds
    groups['other'] = max(0.0, groups['total'] - sum(
        groups[g] for g in CPU_GROUPS if g not in ('total', 'other')))
    return groups


def _ci(found):
    if not found:
        return '-'
    value, low, high = found
    return '%.1f [%.1f, %.1f]' % (value, low, high)


def _main(summary, field, arm=MAIN):
    found = (summary or {}).get('reductions', {}).get(arm)
    return found[field][0] if found and found.get(field) else None


def result_line(measured=None, at_scale=None):
    """The ``RESULT`` line of the measured and the simulated summaries.

    :param measured: the :func:`summarize` of the measured experiment.
    :param at_scale: the :func:`summarize` of the simulation at scale.
    """
    measured = measured or {}
    saved = (measured.get('saved_s_per_task') or {}).get(MAIN)
    values = (
        ('overhead_reduction_pct', _main(measured, 'overhead')),
        ('saved_s_per_task', saved[0] if saved else None),
        ('hit_rate_pct', (measured.get('hit_rate_pct') or {}).get(MAIN)),
        ('idle_vm_s_per_saved_s', measured.get('member_s_per_saved_s')),
        ('total_reduction_pct_at_trace_lengths',
         (measured.get('at_trace_lengths') or {}).get(MAIN)),
        ('sim_overhead_reduction_pct_1k', _main(at_scale, 'overhead')))
    return 'RESULT ' + ' '.join(
        '%s=%s' % (key, 'nan' if value is None or not math.isfinite(value)
                   else '%.2f' % value if key == 'idle_vm_s_per_saved_s'
                   else '%.1f' % value) for key, value in values)
