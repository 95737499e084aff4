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

"""The experiment's report: tables, the summary JSON and the RESULT line."""

import math

from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import stats

GIB = float(1 << 30)
FIELDS = results_mod.STAGES + ('overhead', 'total')


def summarize(results, seed=0):
    """Everything the report shows, as a JSON-able dict."""
    names = results_mod.arm_names(results)
    return {
        'runner': results['runner'], 'measured': results['measured'],
        'arms': names,
        'tables': {arm: stats.arm_table(results, arm) for arm in names},
        'failures': {arm: results_mod.failures(results, arm)
                     for arm in names},
        'reductions': stats.reductions(results, seed=seed),
        'contributions': stats.contributions(results),
        'costs': {arm: results_mod.costs(results, arm) for arm in names},
        'running_share_pct': stats.running_share_pct(results),
        'min_running_share': results['workload']['shape']['task'].get(
            'min_running_share'),
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
        for field in FIELDS:
            cell = summary['tables'][arm][field]
            lines.append('%-20s %-11s %5d %9s %9s %9s' % (
                arm, field, cell['n'], _num(cell['mean']),
                _num(cell['p50']), _num(cell['p95'])))
        if summary['failures'][arm]:
            lines.append('%-20s %d failed launch(es) left out'
                         % (arm, summary['failures'][arm]))
    lines.append('')
    lines.append('Reduction of the median against stock, % [95 % '
                 'bootstrap CI]:')
    lines.append('%-20s %-24s %-24s' % ('arm', 'total', 'overhead'))
    for arm, found in summary['reductions'].items():
        lines.append('%-20s %-24s %-24s' % (arm, _ci(found['total']),
                                            _ci(found['overhead'])))
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
    lines.append('Costs per run: %-7s %14s %12s %13s' % (
        '', 'idle VM-s', 'GiB Glance', 'volume copies'))
    for arm, cost in summary['costs'].items():
        if cost:
            lines.append('%-22s %14.1f %12.2f %13.1f' % (
                arm, cost['idle_vm_seconds'], cost['glance_bytes'] / GIB,
                cost['volume_copies']))
    share = summary['running_share_pct']
    wanted = summary['min_running_share']
    if wanted is not None:
        lines.append('PRECONDITION running share of the stock total %s %% '
                     '>= %.0f %%: %s' % (
                         _num(share, '%.1f'), 100 * wanted,
                         'ok' if preconditions_met(summary) else 'NOT MET'))
    return '\n'.join(lines) + '\n'


def preconditions_met(summary):
    """Whether the running stage holds its share of the stock total."""
    share = summary['running_share_pct']
    wanted = summary['min_running_share']
    return wanted is None or (share is not None and share >= 100 * wanted)


def _ci(found):
    if not found:
        return '-'
    value, low, high = found
    return '%.1f [%.1f, %.1f]' % (value, low, high)


def _main(summary, field):
    found = (summary or {}).get('reductions', {}).get('mlaccel')
    return found[field][0] if found and found.get(field) else None


def result_line(measured=None, at_scale=None):
    """``RESULT total_reduction_pct=... sim_total_reduction_pct_1k=...``.

    :param measured: the :func:`summarize` of the measured experiment.
    :param at_scale: the :func:`summarize` of the simulation at scale.
    """
    values = (('total_reduction_pct', _main(measured, 'total')),
              ('overhead_reduction_pct', _main(measured, 'overhead')),
              ('running_share_pct',
               (measured or {}).get('running_share_pct')),
              ('sim_total_reduction_pct_1k', _main(at_scale, 'total')))
    return 'RESULT ' + ' '.join(
        '%s=%s' % (key, 'nan' if value is None or not math.isfinite(value)
                   else '%.1f' % value) for key, value in values)
