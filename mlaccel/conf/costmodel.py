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

"""Options of the life-cycle cost model shared by every mlaccel part."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_costmodel',
    title='mlaccel life-cycle cost model',
    help='Defaults the cost model uses to predict how many seconds a task '
         'VM needs from host selection to its first training step, for a host '
         'without a report and where no host report has measured the '
         'figure.')

OPTS = [
    cfg.FloatOpt(
        'default_fetch_bandwidth',
        default=100 * 1024 * 1024,
        min=1.0,
        help='Bytes per second a host without a report, or any host when '
             'no report carries a measured fetch bandwidth, is assumed to '
             'download an image at. A host whose report has not measured '
             'it is predicted at the median of the bandwidths the other '
             'reports measured.'),
    cfg.IntOpt(
        'default_image_size',
        default=2 * 1024 ** 3,
        min=0,
        help='Image size in bytes assumed when the request does not say '
             'how large its image is.'),
    cfg.FloatOpt(
        'default_build_seconds',
        default=10.0,
        min=0.0,
        help='Seconds one build takes (image transfer excluded) on a host '
             'without a report, or on any host when no report carries a '
             'measured build throughput. A host whose report has not '
             'measured it is predicted at the median build time the other '
             'reports measured.'),
    cfg.FloatOpt(
        'cold_start_seconds',
        default=3.0,
        min=0.0,
        help='Seconds from an ACTIVE VM to its first training step when the '
             'task must start a cold process (runtime start, imports).'),
    cfg.FloatOpt(
        'warm_start_seconds',
        default=0.1,
        min=0.0,
        deprecated_for_removal=True,
        deprecated_reason='Host reports no longer carry warm task-daemon '
                          'slots (report version 1.1), so the cost model '
                          'predicts a cold start on every host and never '
                          'reads this option. Warm starts come from warm '
                          'pools, which the launcher claims before '
                          'scheduling.',
        help='Seconds from an ACTIVE VM to its first training step when a '
             'warm task daemon slot forks the task. Not used.'),
]
