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

"""``python -m mlaccel_lab.experiment``: the experiment's commands.

``workload``
    print the workload a shape and a seed make.
``run RUNNER``
    run the arms on a runner (:data:`RUNNERS`), write every record as
    JSON, print the tables, draw the charts, then (unless
    ``--no-simulate``) calibrate the simulator from the records and run it
    at scale; the last line is the ``RESULT`` line.

Exit status: 0; 1 when the cloud could not be made ready; 2 for bad
input.
``report RESULTS``
    the tables, charts and ``RESULT`` line of results already written.
``simulate --calibration FILE``
    fit the simulator to an experiment's results (or read a calibration),
    validate it at the experiment's own size, run it at scale.
"""

import argparse
import importlib
import json
import logging
import os
import sys

from mlaccel_lab.experiment import arms as arms_mod
from mlaccel_lab.experiment import calibration as calibration_mod
from mlaccel_lab.experiment import charts
from mlaccel_lab.experiment import production as production_mod
from mlaccel_lab.experiment import protocol
from mlaccel_lab.experiment import report
from mlaccel_lab.experiment import results as results_mod
from mlaccel_lab.experiment import runner as runner_mod
from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import trace as trace_mod
from mlaccel_lab.experiment import validation
from mlaccel_lab.experiment import workload as workload_mod

#: Runner name -> ``module:class`` of a :class:`runner_mod.Runner`.
RUNNERS = {
    'aio': 'mlaccel_lab.experiment.aiorunner:AioRunner',
    'sim': 'mlaccel_lab.experiment.simrunner:SimulatedRunner',
}


def _runner_class(name):
    module, _, attribute = RUNNERS[name].partition(':')
    return getattr(importlib.import_module(module), attribute)


def _arms(options):
    if options.arms:
        return arms_mod.by_name(options.arms.split(','))
    return arms_mod.ablation_arms() if options.ablations \
        else arms_mod.main_arms()


def _add_workload(parser):
    parser.add_argument('--workload', metavar='FILE',
                        help='workload shape (YAML or JSON) replacing the '
                             'shipped one')
    parser.add_argument('--seed', type=int, default=None,
                        help='draw a different workload of the same shape')
    parser.add_argument('--trace', metavar='FILE',
                        help='a CSV file of the trace\'s columns '
                             '(creation_time, deletion_time, num_gpu, '
                             'memory_mib, ...) whose tasks the stream '
                             'replays instead of drawing from the shipped '
                             'figures')


def _add_arms(parser):
    group = parser.add_mutually_exclusive_group()
    group.add_argument('--ablations', action='store_true',
                       help='also each mechanism alone and each left out')
    group.add_argument('--arms', metavar='A,B,...',
                       help='these arms only (stock, mlaccel, only-X, '
                            'without-X)')


def _add_scale(parser):
    parser.add_argument('--production', metavar='FILE',
                        help='stated production parameters (default: '
                             'the shipped ones)')
    parser.add_argument('--hosts', type=int, help='hosts at scale')
    parser.add_argument('--tasks', type=int, help='tasks at scale')
    parser.add_argument('--scale-repetitions', type=int,
                        default=protocol.MIN_REPETITIONS,
                        help='repetitions of each arm at scale')
    parser.add_argument('--records', action='store_true',
                        help='also write every simulated record at scale '
                             '(gzipped JSON lines)')
    parser.add_argument('--no-sensitivity', action='store_true',
                        help='skip the sensitivity table at scale')


def _parser():
    parser = argparse.ArgumentParser(
        prog='python -m mlaccel_lab.experiment',
        description='Stock OpenStack against OpenStack with mlaccel: the '
                    'task life cycle, measured and simulated.')
    commands = parser.add_subparsers(dest='command', required=True)

    show = commands.add_parser('workload', help='print a workload')
    _add_workload(show)
    show.add_argument('--json', action='store_true')

    run = commands.add_parser('run', help='run the experiment')
    runners = run.add_subparsers(dest='runner', required=True)
    for name in sorted(RUNNERS):
        sub = runners.add_parser(name)
        _add_workload(sub)
        _add_arms(sub)
        _add_scale(sub)
        sub.add_argument('--repetitions', type=int,
                         default=protocol.MIN_REPETITIONS)
        sub.add_argument('--warmup', type=int, default=0,
                         help='repetitions run first and discarded (every '
                              'run already starts with an untimed warm-up '
                              'request)')
        sub.add_argument('--order-seed', type=int, default=0,
                         help='seed of the arms\' order per repetition')
        sub.add_argument('--output', default='experiment', metavar='DIR',
                         help='where the JSON and the charts go')
        sub.add_argument('--no-simulate', action='store_true',
                         help='skip the simulation at scale')
        sub.add_argument('--no-progress', action='store_true')
        _runner_class(name).add_arguments(sub)

    rep = commands.add_parser('report', help='report written results')
    rep.add_argument('results', metavar='RESULTS')
    rep.add_argument('--at-scale', metavar='RECORDS',
                     help='records of the simulation at scale (written '
                          'with --records)')
    rep.add_argument('--charts', metavar='DIR')

    sim = commands.add_parser('simulate', help='calibrate, validate, scale')
    sim.add_argument('--calibration', required=True, metavar='FILE',
                     help='an experiment\'s results JSON, or a calibration')
    _add_arms(sim)
    _add_scale(sim)
    sim.add_argument('--seed', type=int, default=None,
                     help='seed of the workload at scale')
    sim.add_argument('--output', default='simulation', metavar='DIR')
    sim.add_argument('--no-progress', action='store_true')
    return parser


def _report(results, title, directory, prefix):
    summary = report.summarize(results)
    print(report.format_summary(summary, title))
    if directory:
        for path in charts.write(results, summary, directory, prefix, title):
            print('chart: %s' % path)
        path = os.path.join(directory, prefix + '-summary.json')
        schema.dump(summary, path)
        print('summary: %s' % path)
    return summary


def _at_scale(cal, options, arms, directory):
    prod = production_mod.load(options.production)
    results, scaled = production_mod.run(
        cal, prod, arms, options.scale_repetitions, hosts=options.hosts,
        tasks=options.tasks, workload_seed=getattr(options, 'seed', None),
        progress=not options.no_progress)
    print('== Assumptions at scale (stated, not measured) ==')
    for name, value, source in production_mod.assumptions(prod, scaled):
        print('%-36s %-22s %s' % (name, value, source))
    for path in production_mod.write(results, directory, options.records):
        print('at scale: %s' % path)
    title = 'Simulated at %d hosts, %d tasks' % (
        scaled.hosts, len(results['workload']['tasks']))
    summary = _report(results, title, directory, 'at-scale')
    if not options.no_sensitivity:
        # No larger than the run at scale itself.
        tasks = min(production_mod.SENSITIVITY_TASKS,
                    len(results['workload']['tasks']))
        print('== Sensitivity at scale (SIMULATED, %d tasks a run) =='
              % tasks)
        print('%-20s %6s %12s %8s' % ('parameter', 'value', 'overhead -%',
                                      'hits %'))
        for parameter, value, cut, hits in production_mod.sensitivity(
                cal, prod, tasks=tasks):
            print('%-20s %6s %12s %8s' % (parameter, value,
                                          _num(cut), _num(hits)))
    return summary


def _num(value):
    return '-' if value is None else '%.1f' % value


def _validate(measured, cal, directory):
    checked = validation.validate(measured, cal)
    print('== The simulator at the experiment\'s own size ==')
    print(checked.format())
    schema.dump(checked.simulated, os.path.join(directory, 'own-size.json'))
    return checked


def _workload(options):
    return workload_mod.load(options.workload, options.seed,
                             getattr(options, 'trace', None))


def _describe(made):
    """The workload's size and, for a stream, where it comes from."""
    stream = made.shape.get('stream')
    text = 'seed %d: %d tasks, %d VMs' % (made.seed, len(made.tasks),
                                          made.vm_count())
    if stream:
        text += ('; an open-loop stream from the %s, its arrivals %.0f '
                 'times faster; images by Zipf popularity: %s' % (
                     trace_mod.CITATION, 1.0 / stream['time_scale'],
                     ', '.join('%s %.0f %%' % (name, 100 * share)
                               for name, share in workload_mod.popularity(
                                   made.shape).items())))
    return text


def cmd_workload(options):
    made = _workload(options)
    if options.json:
        print(json.dumps(made.to_dict(), indent=1))
        return 0
    print(_describe(made))
    for image in made.images:
        print('image %-12s %6d MiB%s' % (image.name,
                                         image.size // workload_mod.MIB,
                                         '  hot' if image.hot else ''))
    for task in made.tasks:
        print('task %3d at %8.1f s  %-12s %d VM(s)  %-6s %d steps%s' % (
            task.index, task.at, task.image, task.vms, task.boot,
            task.steps, '' if task.lifetime is None
            else '  (%.0f s in the trace)' % task.lifetime))
    return 0


def cmd_run(options):
    made = _workload(options)
    print(_describe(made))
    arms = _arms(options)
    os.makedirs(options.output, exist_ok=True)
    runner = _runner_class(options.runner).from_options(options)
    path = os.path.join(options.output, 'results.json')
    results = runner_mod.execute(
        runner, made, arms, options.repetitions, options.warmup,
        options.order_seed, progress=not options.no_progress,
        # Saved after every run: an interrupted experiment keeps its runs.
        on_run=lambda partial: schema.dump(partial, path))
    schema.dump(results, path)
    print('records: %s' % path)
    print('preconditions: %s' % json.dumps(results['preconditions'],
                                           sort_keys=True))
    measured = _report(results, 'Experiment, %d tasks per run' % len(
        made.tasks), options.output, 'experiment')
    at_scale = None
    if not options.no_simulate:
        try:
            cal = calibration_mod.fit(results)
        except calibration_mod.CalibrationError as exc:
            print('simulation skipped: the records cannot calibrate it: %s'
                  % exc)
        else:
            _validate(results, cal, options.output)
            at_scale = _at_scale(cal, options, arms, options.output)
    print(report.result_line(measured, at_scale))
    return 0


def cmd_report(options):
    results = results_mod.load(options.results)
    measured = _report(results, 'Experiment', options.charts, 'experiment')
    at_scale = None
    if options.at_scale:
        at_scale = _report(production_mod.read_records(options.at_scale),
                           'At scale', options.charts, 'at-scale')
    print(report.result_line(measured, at_scale))
    return 0


def cmd_simulate(options):
    os.makedirs(options.output, exist_ok=True)
    cal, measured = calibration_mod.load(options.calibration)
    schema.dump(cal.to_dict(), os.path.join(options.output,
                                            'calibration.json'))
    print('== Calibration ==')
    print(json.dumps(cal.to_dict(), indent=1, sort_keys=True))
    summary = None
    if measured is not None:
        summary = report.summarize(measured)
        _validate(measured, cal, options.output)
    arms = _arms(options)
    at_scale = _at_scale(cal, options, arms, options.output)
    print(report.result_line(summary, at_scale))
    return 0


COMMANDS = {'workload': cmd_workload, 'run': cmd_run,
            'report': cmd_report, 'simulate': cmd_simulate}


def main(argv=None):
    options = _parser().parse_args(argv)
    # py-amqp warns, through logging's last resort on stderr, of each
    # message that reaches a channel while it closes (a notification
    # listener stopping): nothing this command's user can act on.
    logging.getLogger('amqp').setLevel(logging.ERROR)
    try:
        return COMMANDS[options.command](options)
    except (schema.InvalidFile, calibration_mod.CalibrationError,
            ValueError) as exc:
        print('error: %s' % exc, file=sys.stderr)
        return 2
    except runner_mod.RunnerError as exc:
        print('error: %s' % exc, file=sys.stderr)
        return 1
