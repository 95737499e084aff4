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

"""One ``mlaccel-agent`` per compute of the all-in-one cloud.

``etc/mlaccel/agent-<host>.conf`` points the agent at that compute's own
nova.conf files (so it finds its host name, image cache and notification
transport there), at the cloud's state bus with the host's own signing key,
and at the admin cloud of ``clouds.yaml`` for Glance. The agent runs as
service ``mlaccel-agent-<host>`` and stops with its compute.
"""

from oslo_config import cfg

from mlaccel import conf as mlaccel_conf
from mlaccel.statebus import reader
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import procs

CLOUD = 'aio-admin'

#: Short periods, so that tests see a pre-fetch or a report within seconds.
TEST_PERIODS = {'scan_interval': 0.5, 'report_interval': 5.0,
                'hot_refresh_interval': 5.0}
#: Free space pre-fetching leaves on the test machine's disk, MiB.
HEADROOM_MB = 2048


def service(host):
    return 'mlaccel-agent-' + host


def config_file(lay, host):
    return lay.path('etc', 'mlaccel', 'agent-%s.conf' % host)


def write_config(lay, host, **agent_options):
    """Write ``agent-<host>.conf``, with ``agent_options`` added."""
    path = config_file(lay, host)
    agent = dict(TEST_PERIODS, cloud=CLOUD, headroom_mb=HEADROOM_MB,
                 nova_config_files=','.join(
                     configs.compute_config_files(lay, host)))
    agent.update(agent_options)
    configs.write(path, {
        'mlaccel_agent': agent,
        'mlaccel_statebus': {
            'backend_url': lay.agents_bus_url,
            'host_key_file': configs.host_key_file(lay, host),
            'publisher_state_dir': configs.publisher_state_dir(
                lay, 'agent-' + host)},
    })
    return path


def write_configs(lay):
    return [write_config(lay, host) for host in lay.compute_hosts()]


def start(lay, host):
    """Start the agent of ``host`` as a service of the cloud."""
    return procs.start(lay, service(host), [
        lay.bin('mlaccel-agent'), '--config-file', config_file(lay, host)],
        env={'OS_CLIENT_CONFIG_FILE': lay.clouds_yaml})


def reports(lay, url=None):
    """``{host: report}`` of the computes on the bus now.

    Each is checked with the deployment key, as the scheduler checks it.

    :param url: the bus URL to read through (default: the first
        controller's).
    """
    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('backend_url', url or lay.statebus_url,
                      'mlaccel_statebus')
    conf.set_override('deployment_key_file', lay.path(
        'etc', 'mlaccel', 'statebus-deployment.key'), 'mlaccel_statebus')
    cache = reader.ReportCache(conf)
    try:
        cache.refresh()
        snapshot = cache.current()
    finally:
        cache.stop()
    return {host: snapshot.get(host) for host in lay.compute_hosts()
            if snapshot.get(host) is not None}
