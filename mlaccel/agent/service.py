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

"""``mlaccel-agent``: the daemon wiring the agent's parts together.

Threads (native): the reporter (cache scan, expiry of lost builds, report),
the pre-fetcher and one per running fetch, and oslo.messaging's listener.
SIGTERM or SIGINT stops it: running downloads are abandoned (their
temporary files removed), the report leaves the bus, the listener stops.
A configuration it cannot use is one line on stderr and exit status 2.
"""

import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel.agent import builds as agent_builds
from mlaccel.agent import cloud as agent_cloud
from mlaccel.agent import fetchers
from mlaccel.agent import hot as agent_hot
from mlaccel.agent import inventory
from mlaccel.agent import notifications
from mlaccel.agent import novaconf
from mlaccel.agent import prefetch
from mlaccel.agent import report as agent_report
from mlaccel import conf as mlaccel_conf
from mlaccel.conf import agent as agent_conf
from mlaccel.statebus import keys
from mlaccel.statebus import publisher as statebus_publisher
from mlaccel.statebus import url as bus_url

LOG = logging.getLogger(__name__)


class ConfigError(Exception):
    """The agent cannot start with this configuration."""


class Agent:
    """The agent of one compute node.

    :param conf: ``ConfigOpts`` with every mlaccel option.
    :param settings: nova-compute's :class:`~mlaccel.agent.novaconf.
        NovaSettings` (read from ``nova_config_files`` by default).
    :param cloud: a :class:`~mlaccel.agent.cloud.Cloud` (default: from
        ``[mlaccel_agent] cloud``).
    :param transport_url: overrides nova.conf's notification transport.
    """

    def __init__(self, conf, settings=None, cloud=None, transport_url=None):
        self.conf = conf
        opts = self.opts = conf.mlaccel_agent
        if opts.min_build_limit > opts.max_build_limit or not \
                opts.min_build_limit <= opts.initial_build_limit \
                <= opts.max_build_limit:
            raise ConfigError('[mlaccel_agent] needs min_build_limit <= '
                              'initial_build_limit <= max_build_limit')
        try:
            self.settings = settings or novaconf.load(opts.nova_config_files)
        except novaconf.NovaConfError as exc:
            raise ConfigError(str(exc))
        self.host = self.settings.host
        self.cloud = cloud or agent_cloud.Cloud(opts.cloud)
        self.cache = inventory.ImageCache(self.settings.cache_dir,
                                          headroom=opts.headroom_mb << 20)
        self.builds = agent_builds.BuildTracker(
            build_timeout=opts.build_timeout, window=opts.throughput_window,
            **build_limits(opts, self.settings.max_builds))
        self.demand = agent_hot.Demand(opts.demand_window,
                                       opts.demand_builds)
        self.hot = agent_hot.HotImages(opts, self.cloud, demand=self.demand)
        try:
            fetcher = fetchers.load(opts.fetcher, self.settings, opts,
                                    self.cloud, self.cache) \
                if self.cloud.configured else None
        except (fetchers.UnknownFetcher, ValueError) as exc:
            raise ConfigError(str(exc))
        self.prefetcher = prefetch.Prefetcher(
            fetcher, self.hot, self.cache, self.builds,
            max_fetches=opts.max_concurrent_fetches,
            interval=opts.scan_interval) if fetcher is not None else None
        self.listener = None
        if opts.listen_notifications:
            url = transport_url or self.settings.transport_url
            if not url:
                LOG.warning('nova.conf names no notification transport: '
                            'builds are not measured')
            else:
                self.listener = notifications.Listener(
                    self.settings, '%s-%s' % (opts.notification_pool,
                                              self.host),
                    self.builds, url=url,
                    on_image=lambda image: self.cache.learn([image]),
                    on_demand=self.demand.seen)
        self.publisher = statebus_publisher.Publisher(
            self.host, conf, host_keys=_host_keys(conf, self.host))
        self.reporter = agent_report.Reporter(
            self.publisher, self.report, self._scan, opts.report_interval,
            opts.scan_interval, conf)
        if self.prefetcher is not None:
            self.prefetcher.on_change = self.reporter.wake
        self._next_names = 0.0
        self._naming = None
        conf.register_mutate_hook(self._reloaded)

    def _reloaded(self, conf, changed):
        """Apply the intervals of a reloaded configuration (SIGHUP).

        The hot image options are read on each pass and need nothing here.
        """
        self.reporter.interval = self.opts.report_interval
        self.reporter.tick = self.opts.scan_interval
        if self.prefetcher is not None:
            self.prefetcher.interval = self.opts.scan_interval

    def report(self):
        return agent_report.assemble(
            self.host, self.cache, self.builds, self.prefetcher,
            max_images=self.conf.mlaccel_statebus.max_cached_images)

    def _scan(self):
        self.cache.scan()
        self.builds.expire()
        self._name_unknown()

    def _name_unknown(self):
        """Map cache entries without a known id through Glance (rarely).

        In a thread of its own: a slow Glance must not delay the report.
        """
        if not self.cache.unknown_names() or not self.cloud.configured or \
                time.monotonic() < self._next_names or \
                (self._naming is not None and self._naming.is_alive()):
            return
        self._next_names = time.monotonic() + self.opts.hot_refresh_interval

        def name():
            try:
                self.cache.learn(self.hot.all_ids())
            except Exception as exc:
                LOG.warning('Cannot list images in Glance to name cache '
                            'entries: %s', exc)
        self._naming = threading.Thread(target=name, daemon=True,
                                        name='mlaccel-agent-names')
        self._naming.start()

    def start(self):
        """Clean up after an earlier run and start every thread."""
        self.cache.remove_temporaries()
        self.cache.learn(self.opts.hot_images)
        self.cache.scan()
        if self.listener is not None:
            self.listener.start()
        self.reporter.start()
        if self.prefetcher is not None:
            self.prefetcher.start()
        LOG.info('mlaccel-agent of host %s started: cache %s, fetcher %s',
                 self.host, self.cache.path,
                 self.opts.fetcher if self.prefetcher else 'none')

    def stop(self):
        """Abandon fetches, stop listening, leave the bus."""
        if self.prefetcher is not None:
            self.prefetcher.stop()
        if self.listener is not None:
            self.listener.stop()
        self.reporter.stop()
        self.cloud.close()
        LOG.info('mlaccel-agent of host %s stopped', self.host)


def build_limits(opts, max_builds):
    """``initial``, ``min_limit`` and ``max_limit`` of the build limiter.

    nova-compute runs at most ``max_builds`` builds at once (0: no bound):
    a published limit above it would promise slots that queue inside
    nova-compute, so the limits are capped there (logged once).
    """
    limits = {'initial': opts.initial_build_limit,
              'min_limit': opts.min_build_limit,
              'max_limit': opts.max_build_limit}
    if max_builds and opts.max_build_limit > max_builds:
        LOG.info('Build limit capped at nova-compute\'s '
                 'max_concurrent_builds = %d ([mlaccel_agent] '
                 'max_build_limit is %d)', max_builds, opts.max_build_limit)
        limits = {name: min(value, max_builds)
                  for name, value in limits.items()}
    return limits


def _host_keys(conf, host):
    """Check the bus URL and read this host's keys.

    ``None`` without a key file: the publisher then publishes nothing, or
    unsigned reports with ``allow_unsigned_reports``.

    :raises ConfigError: for a URL no backend serves or a bad key file.
    """
    opts = conf.mlaccel_statebus
    try:
        bus_url.tooz_url(opts.backend_url)
    except bus_url.BackendError as exc:
        raise ConfigError('[mlaccel_statebus] backend_url: %s'
                          % bus_url.redact(exc, opts.backend_url))
    if not opts.host_key_file:
        return None
    try:
        return statebus_publisher.host_keys_of(conf, host)
    except keys.KeyFileError as exc:
        raise ConfigError('[mlaccel_statebus] host_key_file: %s' % exc)


def parse_args(argv, conf=None):
    conf = conf or cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    mlaccel_conf.register_group(conf, agent_conf)
    logging.register_options(conf)
    conf(argv, project='mlaccel', prog='mlaccel-agent')
    return conf
