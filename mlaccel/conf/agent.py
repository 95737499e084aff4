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

"""Options of the compute-node agent, ``mlaccel-agent``."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_agent',
    title='mlaccel compute-node agent',
    help='mlaccel-agent runs beside nova-compute on every compute node. It '
         'publishes the node\'s host report on the state bus '
         '([mlaccel_statebus]), pre-fetches hot images into Nova\'s image '
         'cache and learns how many builds the node takes at once from '
         'Nova\'s versioned notifications. What Nova already knows (the '
         'host name, instances_path, [image_cache] subdirectory_name, '
         'force_raw_images, the notification transport) is read from '
         'nova.conf and never configured here.')

OPTS = [
    cfg.ListOpt(
        'nova_config_files',
        default=['/etc/nova/nova.conf'],
        help='nova-compute\'s configuration files, read in this order (a '
             'later file overrides an earlier one, as in nova-compute). '
             'The agent takes from them [DEFAULT] host, instances_path, '
             'state_path, force_raw_images and transport_url, [image_cache] '
             'subdirectory_name, [notifications] '
             'versioned_notifications_topics and '
             '[oslo_messaging_notifications] transport_url, plus the '
             '[oslo_messaging_rabbit] settings of that transport. The first '
             'file must exist.'),
    cfg.FloatOpt(
        'report_interval',
        mutable=True,
        default=10.0,
        min=0.5,
        help='Seconds between two publications of the host report when '
             'nothing changed. A change (an image cached or removed, a '
             'build started or ended, a new build limit) is published at '
             'once. Keep it well below [mlaccel_statebus] report_max_age, '
             'after which readers ignore a report.'),
    cfg.FloatOpt(
        'scan_interval',
        mutable=True,
        default=2.0,
        min=0.1,
        help='Seconds between two scans of the image cache directory. A '
             'scan reads the directory\'s entries and their sizes, no file '
             'contents, so it is cheap even with thousands of images.'),
    cfg.StrOpt(
        'fetcher',
        default='glance',
        help='How hot images are pre-fetched: the name of a plugin in the '
             '"mlaccel.agent.fetchers" entry-point namespace. "glance" '
             'downloads the image from Glance, verifies its os_hash_value '
             'and puts it into the image cache under the name and in the '
             'format nova-compute reuses. "nova-precache" asks Nova\'s '
             'aggregate image pre-cache API (microversion 2.81) for the '
             'aggregate named by precache_aggregate, so nova-compute itself '
             'writes the file. "none" pre-fetches nothing.'),
    cfg.StrOpt(
        'cloud',
        help='Name of the cloud in clouds.yaml (openstacksdk) whose '
             'credentials the agent uses to read image metadata from Glance '
             'and to download or pre-cache images. It needs to read images '
             'marked hot (usually public or shared ones) and, for '
             '"nova-precache", the compute:aggregates:images policy. Unset, '
             'the agent neither pre-fetches nor maps cache entries to image '
             'ids through Glance; it still reports the images named in '
             'hot_images and builds.'),
    cfg.ListOpt(
        'hot_images',
        mutable=True,
        default=[],
        help='Ids of images the operator wants in this node\'s image cache '
             'at all times, pre-fetched in the order given.'),
    cfg.StrOpt(
        'hot_property',
        mutable=True,
        default='mlaccel_hot',
        help='Glance image property that marks an image hot in the whole '
             'cloud: an image of one of hot_image_owners whose property has '
             'the value "true" is pre-fetched by every agent (the Cinder '
             'mirror-volume cache reads the same property). Empty: only '
             'hot_images are pre-fetched.'),
    cfg.ListOpt(
        'hot_image_owners',
        mutable=True,
        default=[],
        help='Ids of the projects whose images may be made hot by '
             'hot_property (and, when they are not public, by '
             'demand_builds): the operator\'s projects. Any owner can set '
             'a property on its own image, and a tenant\'s word must not '
             'make every node download its image. Public images (only an '
             'admin can publish one) may be hot by demand whoever owns '
             'them. Empty: the project of the agent\'s own credentials '
             '(cloud) only.'),
    cfg.IntOpt(
        'hot_max_image_mb',
        mutable=True,
        default=32768,
        min=0,
        help='Largest image, in MiB, that hot_property or demand_builds '
             'make the agent pre-fetch (images named in hot_images are '
             'not bounded). 0: no bound.'),
    cfg.IntOpt(
        'hot_max_owner_mb',
        mutable=True,
        default=65536,
        min=0,
        help='Most MiB of images of one owner that hot_property and '
             'demand_builds make the agent pre-fetch; the images past it, '
             'in the order they are found, are left to nova-compute\'s '
             'own downloads. 0: no bound.'),
    cfg.IntOpt(
        'demand_builds',
        default=3,
        min=0,
        help='An image whose builds started at least this many times on '
             'the computes of the cloud (any of them) within demand_window '
             'seconds is hot: the agent pre-fetches it before it is booted '
             'here. Counted from Nova\'s versioned instance.create.start '
             'notifications, so it needs listen_notifications. 0: demand '
             'makes no image hot.'),
    cfg.FloatOpt(
        'demand_window',
        default=3600.0,
        min=1.0,
        help='Seconds of builds counted for demand_builds.'),
    cfg.FloatOpt(
        'hot_refresh_interval',
        mutable=True,
        default=60.0,
        min=1.0,
        help='Seconds between two queries to Glance for images marked hot '
             'and for the ids of unknown image cache entries.'),
    cfg.IntOpt(
        'headroom_mb',
        default=10240,
        min=0,
        help='Free space, in MiB, that pre-fetching always leaves on the '
             'file system of the image cache, for nova-compute\'s own '
             'downloads and the instances\' disks. A fetch that would pass '
             'it does not start, one that passes it while running (someone '
             'else filled the disk) is abandoned, and the report\'s '
             'cache_free_bytes counts only the space above it (0: the '
             'cache has no room left).'),
    cfg.IntOpt(
        'max_concurrent_fetches',
        default=2,
        min=1,
        help='Most pre-fetches at once. Within it, the agent\'s adaptive '
             'limiter picks how many run from the download times it '
             'measures; no pre-fetch starts while builds fill the node\'s '
             'build limit.'),
    cfg.FloatOpt(
        'fetch_timeout',
        default=3600.0,
        min=1.0,
        help='Seconds one pre-fetch may take; a slower one is abandoned '
             '(its temporary file removed) and retried later.'),
    cfg.StrOpt(
        'precache_aggregate',
        help='For the "nova-precache" fetcher: name or id of the host '
             'aggregate whose image pre-cache the agent requests. Nova '
             'caches the image on every host of the aggregate; a one-host '
             'aggregate per compute node caches on that node only.'),
    cfg.BoolOpt(
        'listen_notifications',
        default=True,
        help='Whether to learn build pacing from Nova\'s versioned '
             'notifications (instance.create.start/.end/.error) of this '
             'host. They need [notifications] notification_format = '
             'versioned (or both) and [oslo_messaging_notifications] driver '
             '= messagingv2 in nova.conf. Without them the report carries '
             'no build_limit, build_throughput or builds_in_flight (0).'),
    cfg.StrOpt(
        'notification_pool',
        default='mlaccel-agent',
        help='Prefix of the notification pool (a queue of its own on '
             'RabbitMQ) the agent consumes from; the host name is appended. '
             'A pool of its own never takes a notification from another '
             'consumer of the topic, and the queue keeps the notifications '
             'sent while the agent restarts.'),
    cfg.IntOpt(
        'initial_build_limit',
        default=4,
        min=1,
        help='Build limit published until builds have been measured.'),
    cfg.IntOpt(
        'min_build_limit',
        default=1,
        min=1,
        help='The adaptive build limit never goes below this.'),
    cfg.IntOpt(
        'max_build_limit',
        default=10,
        min=1,
        help='The adaptive build limit never goes above this, nor above '
             'nova-compute\'s max_concurrent_builds (read from nova.conf; '
             'builds past that wait in nova-compute whatever the limit '
             'says).'),
    cfg.FloatOpt(
        'build_timeout',
        default=3600.0,
        min=1.0,
        help='Seconds after which a build with an instance.create.start '
             'but no .end or .error (lost notification, nova-compute '
             'restarted under it) is forgotten, counted as a failed build.'),
    cfg.FloatOpt(
        'throughput_window',
        default=600.0,
        min=1.0,
        help='Seconds of completed builds over which build_throughput '
             '(builds completed per second) is measured.'),
]
