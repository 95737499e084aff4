# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Options of the Nova scheduler filter and weighers."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_scheduler',
    title='mlaccel Nova scheduler plugins',
    help='Options of the BuildSlotFilter and the LifecycleWeigher. Each '
         'multiplier and limit can be overridden per '
         'host aggregate, as the in-tree weighers allow, with aggregate '
         'metadata named like the option with an "mlaccel" prefix, e.g. '
         '"mlaccel_lifecycle_weight_multiplier".')

OPTS = [
    cfg.FloatOpt(
        'image_locality_weight_multiplier',
        default=2.0,
        help='Multiplier of the LifecycleWeigher\'s image-locality term. '
             'Positive values prefer hosts that already hold the requested '
             'image in their image cache; 0 turns the term off; negative '
             'values spread images. The term is normalised to 0..1 before '
             'multiplying, like every Nova weigher, so 2.0 outweighs two '
             'stock weighers. '
             'Per aggregate: metadata key '
             '"mlaccel_image_locality_weight_multiplier".'),
    cfg.FloatOpt(
        'lifecycle_weight_multiplier',
        default=3.0,
        help='Multiplier of the LifecycleWeigher\'s predicted-start term, '
             'which prefers the host with the fewest predicted seconds until '
             'the task starts (image transfer, builds queued ahead including '
             'those this scheduler sent since the host\'s last report, '
             'process start). '
             'Per aggregate: metadata key '
             '"mlaccel_lifecycle_weight_multiplier".'),
    cfg.BoolOpt(
        'build_slot_fail_open',
        default=True,
        help='What the BuildSlotFilter does with a host whose report is '
             'missing, stale or malformed: pass it (true, stock behaviour) '
             'or reject it (false, for clouds where every compute runs the '
             'mlaccel agent). Like the build limit, this never fails a '
             'boot: when no host would be left, every host stays.'),
    cfg.IntOpt(
        'max_builds_per_host',
        default=0,
        min=0,
        help='Upper bound on the adaptive build limit a host reports; the '
             'BuildSlotFilter uses the smaller of the two. The limit steers '
             'builds, it never fails a boot: when the free build slots '
             'cannot take every instance of a request, full hosts stay '
             'candidates and builds queue where they are predicted to start '
             'soonest. 0 means the reported limit alone. Per aggregate: '
             'metadata key '
             '"mlaccel_max_builds_per_host".'),
]
