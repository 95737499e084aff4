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

"""Options of the Cinder mirror-volume driver (``mlaccel.cinder``)."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_cinder',
    title='mlaccel mirror-volume cache for Cinder',
    help='The mirror-volume driver keeps one golden volume per image on a '
         'backend, owned by Cinder\'s internal tenant '
         '([DEFAULT] cinder_internal_tenant_project_id and _user_id), and '
         'creates volumes from images as clones of it through the wrapped '
         'backend driver. These options apply to every backend section '
         'whose volume_driver is mlaccel.cinder.driver.MirrorVolumeDriver; '
         'a backend section names its own real driver with '
         'mlaccel_backend_driver.')

OPTS = [
    cfg.StrOpt(
        'backend_driver',
        help='Import path of the real volume driver class the mirror-volume '
             'driver wraps, e.g. '
             '"cinder.volume.drivers.nfs.NfsDriver". Every operation but '
             'creating a volume from an image is that driver\'s own. A '
             'backend section may set mlaccel_backend_driver to override '
             'this value for that backend; one of the two must be set.'),
    cfg.IntOpt(
        'max_cache_mib',
        default=0,
        min=0,
        help='Upper bound, in MiB of image data, on the golden volumes one '
             'backend keeps; 0 means no bound. When a new golden volume '
             'would exceed it, the entries of least value (requests served '
             'times seconds to re-create, per byte) are deleted first; an '
             'entry being cloned or pinned is never deleted. If no room can '
             'be made, the request takes Cinder\'s normal path.'),
    cfg.IntOpt(
        'max_cache_count',
        default=0,
        min=0,
        help='Upper bound on the number of golden volumes one backend '
             'keeps; 0 means no bound. Enforced like max_cache_mib.'),
    cfg.StrOpt(
        'hot_image_property',
        default='mlaccel_hot',
        help='Glance image property that marks an image hot: an image '
             'of one of hot_image_owners whose property has the value '
             '"true" gets its golden volume made by the pre-warm task (see '
             'prewarm_interval) before the first request for it, pinned if '
             'pin_prewarmed is set. The compute agent pre-fetches images by '
             'the same property ([mlaccel_agent] hot_property); keep the '
             'two equal. Empty: Glance is not asked. Listing images needs a '
             'Glance user: Cinder\'s own [glance] auth_type and '
             'credentials.'),
    cfg.ListOpt(
        'hot_image_owners',
        default=[],
        help='Ids of the projects whose images hot_image_property may mark '
             'hot: the operator\'s projects (usually the admin project). '
             'Any owner can set a property on its own image, and a '
             'tenant\'s word must not pin golden volumes on every backend. '
             'Empty: only images of Cinder\'s internal tenant '
             '(cinder_internal_tenant_project_id).'),
    cfg.ListOpt(
        'prewarm_images',
        default=[],
        help='Ids of images whose golden volumes every backend of the '
             'mirror-volume driver keeps at all times, made by the pre-warm '
             'task and pinned if pin_prewarmed is set.'),
    cfg.IntOpt(
        'bus_hot_min_hosts',
        default=2,
        min=0,
        help='An image in the image caches of at least this many compute '
             'nodes, by their host reports on the state bus '
             '([mlaccel_statebus]), is hot: the pre-warm task makes its '
             'golden volume when the cache limits have room for it without '
             'evicting anything. Such golden volumes are not pinned. 0: the '
             'state bus is not read.'),
    cfg.IntOpt(
        'bus_hot_max_images',
        default=5,
        min=0,
        help='Most images hot on the state bus (see bus_hot_min_hosts) the '
             'pre-warm task considers per pass, the most widely cached '
             'first.'),
    cfg.FloatOpt(
        'prewarm_interval',
        default=300.0,
        min=0.0,
        help='Seconds between two passes of the pre-warm task of each '
             'backend, which makes the golden volumes of the images named '
             'in prewarm_images, marked hot in Glance (hot_image_property) '
             'and hot on the state bus (bus_hot_min_hosts). The first pass '
             'runs when cinder-volume starts. Downloads are paced like '
             'those of requests (max_concurrent_downloads). 0 turns the '
             'task off; "mlaccel-cinder-cache prewarm" still works.'),
    cfg.BoolOpt(
        'pin_prewarmed',
        default=True,
        help='Pin the golden volume of an image pre-warmed by an operator, '
             'named in prewarm_images or marked hot in Glance, so that '
             'eviction never deletes it. "mlaccel-cinder-cache evict" still '
             'does.'),
    cfg.IntOpt(
        'wait_timeout',
        default=3600,
        min=1,
        help='Seconds a request for an image waits for another request\'s '
             'download of the same image to finish before it gives up and '
             'fails with a clear error.'),
    cfg.IntOpt(
        'max_concurrent_downloads',
        default=2,
        min=1,
        help='Upper bound on concurrent image downloads into golden '
             'volumes on one backend. Downloads are paced by the adaptive '
             'limiter below this bound; requests for the same image never '
             'download twice whatever the bound.'),
    cfg.IntOpt(
        'max_concurrent_copies',
        default=4,
        min=1,
        help='Upper bound on concurrent clones of golden volumes on one '
             'backend (into new volumes and into the ready pool). Clones '
             'are paced by the adaptive limiter below this bound, which '
             'lowers the limit when clones slow down because the backend '
             'is saturated; requests beyond the limit wait their turn. '
             'Backends with copy-on-write clones can take a high bound; '
             'backends that copy the data, a low one.'),
    cfg.IntOpt(
        'pool_size',
        default=2,
        min=0,
        help='Most clones of one image\'s golden volume kept ready in '
             'advance (the ready pool); a request takes one at once instead '
             'of waiting for a clone, and another is made in the '
             'background. An image\'s pool holds half the requests for it '
             'in the last pool_window seconds, up to this number; a pinned '
             'image keeps the full number. Ready clones count against the '
             'internal tenant\'s quota but not against max_cache_mib. '
             '0 turns the pool off.'),
    cfg.StrOpt(
        'report_group',
        default='mlaccel-cinder-backends',
        help='State bus group ([mlaccel_statebus]) in which each backend '
             'of the mirror-volume driver publishes which images it holds '
             'golden volumes of, and from which the GoldenImageWeigher of '
             'cinder-scheduler reads them. Reports are signed and checked '
             'like host reports, with the keys of [mlaccel_statebus]: a '
             'backend\'s key is derived for its name, host@backend.'),
    cfg.FloatOpt(
        'report_interval',
        default=10.0,
        min=0.0,
        help='Seconds between two reports of a backend\'s golden images '
             'on the state bus; a report is also published at once when '
             'they change. Keep it well below [mlaccel_statebus] '
             'report_max_age, after which readers ignore a report. 0: no '
             'reports (the weigher then prefers no backend).'),
    cfg.FloatOpt(
        'golden_weight_multiplier',
        default=2.0,
        help='Multiplier of GoldenImageWeigher in cinder-scheduler. A '
             'backend holding the golden volume of the image a volume is '
             'created from weighs 1, others 0, before this multiplier. '
             'Cinder\'s CapacityWeigher weighs 0 to 1 (times '
             'capacity_weight_multiplier), so the default of 2 makes the '
             'golden volume win over free space; a negative value avoids '
             'such backends.'),
    cfg.BoolOpt(
        'pool_adaptive',
        default=True,
        help='Let the ready pool stand aside, neither handing clones over '
             'nor making them, while the backend clones a golden volume '
             'faster than a handover takes (a few database writes), as on '
             'copy-on-write backends. Both are measured as they happen. '
             'False: the pool always serves.'),
    cfg.IntOpt(
        'pool_window',
        default=600,
        min=1,
        help='Seconds of request history that set an image\'s ready pool '
             'size (see pool_size).'),
]

BACKEND_OPTS = [
    cfg.StrOpt(
        'mlaccel_backend_driver',
        help='In a backend section: import path of the real volume driver '
             'the mirror-volume driver wraps for this backend. Overrides '
             '[mlaccel_cinder] backend_driver.'),
]
