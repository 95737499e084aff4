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

"""A CLIP-style multimodal learning task on data it generates itself.

A small image encoder and text encoder are trained contrastively on
pictures of coloured shapes and their captions (see
:mod:`mlaccel.tasks.clip_model`); the result reports the loss curve and
the image-to-text retrieval accuracy on held-out pairs.

Deterministic for a seed and a thread count, whether run cold::

    python -m mlaccel.tasks.clip --steps 300 --seed 1

or submitted to mlaccel-taskd as the registered task ``clip`` (entry point
``mlaccel.tasks.clip:main``), with :data:`PRELOAD` preloaded for a warm
start. This module imports torch only when the task runs or warms up, so
that configuration and launcher code can read :data:`PRELOAD` cheaply.
"""

import argparse
import json
import sys
import time

#: What mlaccel-taskd preloads for a warm start of this task: torch, the
#: torch._dynamo that the first optimizer step imports lazily (half of a
#: cold start), and the warm-up hook that builds the model and takes two
#: steps. The one home of this list.
PRELOAD = ('torch', 'torch._dynamo', 'mlaccel.tasks.clip:warm')

#: ``device_ms``: the accelerator's share of a step, in milliseconds,
#: spent waiting after the step's real computation. The test hypervisor's
#: guests share the host's cores and have no accelerator; this stands in
#: for the step time a VM's own GPU adds, which does not depend on how many
#: other VMs run (0: none, the default).
DEFAULTS = {'steps': 300, 'seed': 0, 'batch_size': 32, 'lr': 3e-3,
            'train_size': 2048, 'eval_size': 256, 'device_ms': 0.0}


def warm():
    """Warm-up hook for taskd: build the model and take two steps."""
    from mlaccel.tasks import clip_model
    clip_model.warm()


def main(args):
    """Train; return the loss curve and held-out retrieval accuracy."""
    unknown = set(args) - set(DEFAULTS)
    if unknown:
        raise ValueError('unknown clip task argument(s): %s'
                         % ', '.join(sorted(unknown)))
    if not float(args.get('device_ms', 0.0)) >= 0:
        raise ValueError('device_ms must be 0 or more, got %r'
                         % (args['device_ms'],))
    from mlaccel.tasks import clip_model
    return clip_model.train(dict(DEFAULTS, **args))


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='python -m mlaccel.tasks.clip', description=__doc__.split(
            '\n')[0])
    parser.add_argument('--steps', type=int, default=DEFAULTS['steps'])
    parser.add_argument('--seed', type=int, default=DEFAULTS['seed'])
    parser.add_argument('--batch-size', type=int,
                        default=DEFAULTS['batch_size'])
    parser.add_argument('--lr', type=float, default=DEFAULTS['lr'])
    parser.add_argument('--device-ms', type=float,
                        default=DEFAULTS['device_ms'],
                        help='milliseconds a step waits after its '
                             'computation, standing in for an '
                             'accelerator (default: 0)')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch thread count; the model is too small '
                             'to gain from more than one (default: 1)')
    parser.add_argument('--print-times', action='store_true',
                        help='print "%s <event> <UNIX time>" lines as the '
                             'process starts, the training loop takes its '
                             'first step and the task ends, for a client '
                             'that reads them from the console'
                             % TIMES_PREFIX)
    return parser.parse_args(argv)


#: Start of the lines ``--print-times`` prints: ``<prefix> started|
#: first_step|finished <UNIX time>``.
TIMES_PREFIX = 'MLACCEL_TASK_TIME'


def print_time(event, when):
    print('%s %s %.6f' % (TIMES_PREFIX, event, when), flush=True)


def read_times(text):
    """``{event: UNIX time}`` of the ``--print-times`` lines in ``text``.

    The first line of each event counts; other lines are ignored.
    """
    times = {}
    for line in (text or '').splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == TIMES_PREFIX:
            try:
                times.setdefault(words[1], float(words[2]))
            except ValueError:
                continue
    return times


def cli(argv=None):
    """Run cold; print the result as one JSON line."""
    started = time.time()
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    if opts.print_times:
        import mlaccel.tasks
        print_time('started', started)
        mlaccel.tasks.bind_reporter(
            lambda event: print_time(event['event'], event['at']))
    import torch
    torch.set_num_threads(opts.threads)
    result = main({'steps': opts.steps, 'seed': opts.seed,
                   'batch_size': opts.batch_size, 'lr': opts.lr,
                   'device_ms': opts.device_ms})
    print(json.dumps(result), flush=True)
    if opts.print_times:
        print_time('finished', time.time())
    return 0


if __name__ == '__main__':
    sys.exit(cli())
