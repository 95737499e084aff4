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
        help='Glance image property that marks an image hot. A hot image '
             'is pre-warmed by "mlaccel-volume-cache prewarm --hot" and its '
             'golden volume is pinned (never evicted). The compute agent '
             'reads the same property to pre-fetch images to its hosts.'),
    cfg.BoolOpt(
        'pin_prewarmed',
        default=True,
        help='Pin the golden volume of an image pre-warmed by an operator, '
             'so that eviction never deletes it. "mlaccel-volume-cache '
             'evict" still does.'),
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
