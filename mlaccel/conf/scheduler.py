"""Options of the Nova scheduler filter and weighers."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_scheduler',
    title='mlaccel Nova scheduler plugins',
    help='Options of the BuildSlotFilter, ImageLocalityWeigher and '
         'LifecycleWeigher. Each multiplier and limit can be overridden per '
         'host aggregate, as the in-tree weighers allow, with aggregate '
         'metadata named like the option with an "mlaccel" prefix, e.g. '
         '"mlaccel_lifecycle_weight_multiplier".')

OPTS = [
    cfg.FloatOpt(
        'image_locality_weight_multiplier',
        default=2.0,
        help='Multiplier of the ImageLocalityWeigher. Positive values '
             'prefer hosts that already hold the requested image in their '
             'image cache; 0 disables the weigher; negative values spread '
             'images. Weights are normalised to 0..1 before multiplying, '
             'like every Nova weigher, so 2.0 outweighs two stock weighers. '
             'Per aggregate: metadata key '
             '"mlaccel_image_locality_weight_multiplier".'),
    cfg.FloatOpt(
        'lifecycle_weight_multiplier',
        default=3.0,
        help='Multiplier of the LifecycleWeigher, which prefers the host '
             'with the fewest predicted seconds until the task starts '
             '(image transfer, builds queued ahead, warm or cold start). '
             'Per aggregate: metadata key '
             '"mlaccel_lifecycle_weight_multiplier".'),
    cfg.BoolOpt(
        'build_slot_fail_open',
        default=True,
        help='What the BuildSlotFilter does with a host whose report is '
             'missing, stale or malformed: pass it (true, stock behaviour) '
             'or reject it (false, for clouds where every compute runs the '
             'mlaccel agent).'),
    cfg.IntOpt(
        'max_builds_per_host',
        default=0,
        min=0,
        help='Upper bound on the adaptive build limit a host reports; the '
             'BuildSlotFilter uses the smaller of the two. 0 means the '
             'reported limit alone. Per aggregate: metadata key '
             '"mlaccel_max_builds_per_host".'),
]
