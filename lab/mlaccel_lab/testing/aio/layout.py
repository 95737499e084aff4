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

"""Where the all-in-one cloud keeps its files and which ports it uses."""

import dataclasses
import json
import os
import sys

#: Environment variable naming a running cloud's base directory: the
#: default of ``--base``, read by functional tests that want a real service.
BASE_ENV = 'MLACCEL_AIO_BASE'
#: Set to the base directory in the environment of every process the
#: harness starts (and so of their children): what ``down`` sweeps for.
MARKER_ENV = 'MLACCEL_AIO_PROCESS_OF'

DB_USER = 'os'
DB_PASSWORD = 'ospw'
ADMIN_PASSWORD = 'adminpw'
SERVICE_PASSWORD = 'svcpw'
REGION = 'RegionOne'
SERVICE_USERS = ('glance', 'placement', 'nova', 'cinder')
DATABASES = ('keystone', 'glance', 'placement', 'nova_api', 'nova',
             'nova_cell0', 'cinder')
#: Members of the etcd cluster of a cloud of several controllers.
ETCD_MEMBERS = 3


@dataclasses.dataclass(frozen=True)
class Ports:
    """Loopback ports, away from the standard ones and the ephemeral ones.

    A developer's own services on the standard ports do not clash, and no
    port is in Linux's default ephemeral range (32768-60999), from which
    the kernel picks the local port of every outgoing connection: a
    service binding a port a client socket happens to hold fails with
    "Address already in use". RabbitMQ's distribution port is ``amqp + 1``.
    """

    db: int = 23306
    amqp: int = 25672
    epmd: int = 24369
    redis: int = 26379
    keystone: int = 25000
    glance: int = 29292
    placement: int = 28778
    nova: int = 28774
    neutron: int = 29696
    cinder: int = 28776
    #: The first etcd member's client port; member ``m`` listens for
    #: clients on ``etcd + m`` and for its peers on ``etcd + 10 + m``.
    etcd: int = 22379

    def all(self):
        """Every port the cloud binds, RabbitMQ's distribution port too."""
        ports = list(dataclasses.astuple(self))
        return ports + [self.amqp + 1] + [
            port for m in range(ETCD_MEMBERS) for port in (
                self.etcd_client(m), self.etcd_peer(m))
            if port != self.etcd]

    def etcd_client(self, member):
        return self.etcd + member

    def etcd_peer(self, member):
        return self.etcd + 10 + member


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a cloud was brought up with; saved so later commands agree."""

    computes: int = 2
    cinder: bool = True
    mlaccel: bool = True
    #: Controllers: one, on a Redis state bus; or several, each running a
    #: nova-scheduler, a cinder-scheduler and a pool manager on its own
    #: member of a three-member etcd cluster.
    controllers: int = 1
    #: Cinder's file volumes on an XFS with reflink (loop-mounted), where
    #: a clone is copy-on-write as on most production backends; False, or
    #: where none can be mounted: every clone copies the data.
    reflink_volumes: bool = True
    ports: Ports = Ports()

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        data = dict(data)
        data['ports'] = Ports(**data.get('ports', {}))
        return cls(**data)


class Layout:
    """Paths and URLs of one cloud under ``base``."""

    def __init__(self, base, settings=None):
        self.base = os.path.abspath(base)
        self.settings = settings or self.load_settings() or Settings()
        self.ports = self.settings.ports
        self.venv = sys.prefix
        for name in ('etc', 'data', 'log', 'run', 'pids'):
            setattr(self, name, os.path.join(self.base, name))

    # files --------------------------------------------------------------
    def path(self, *parts):
        return os.path.join(self.base, *parts)

    def bin(self, name):
        """An executable of the Python environment running the harness."""
        return os.path.join(os.path.dirname(sys.executable), name)

    def compute_hosts(self):
        return ['aio%d' % (index + 1)
                for index in range(self.settings.computes)]

    def instances_path(self, host):
        return self.path('data', 'nova-' + host, 'instances')

    @property
    def settings_file(self):
        return self.path('run', 'settings.json')

    @property
    def cloud_file(self):
        return self.path('run', 'cloud.json')

    def load_settings(self):
        try:
            with open(os.path.join(self.base, 'run', 'settings.json')) as f:
                return Settings.from_dict(json.load(f))
        except FileNotFoundError:
            return None

    def save_settings(self):
        os.makedirs(self.run, exist_ok=True)
        with open(self.settings_file, 'w') as f:
            json.dump(self.settings.to_dict(), f, indent=1)

    def load_cloud(self):
        """Ids of the image and flavors made at bring-up."""
        with open(self.cloud_file) as f:
            return json.load(f)

    # URLs ---------------------------------------------------------------
    def db_url(self, name):
        return 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s' % (
            DB_USER, DB_PASSWORD, self.ports.db, name)

    @property
    def transport_url(self):
        return 'rabbit://guest:guest@127.0.0.1:%d/' % self.ports.amqp

    @property
    def etcd(self):
        """Whether the state bus is an etcd cluster (several controllers)."""
        return self.settings.controllers > 1

    @property
    def statebus_url(self):
        """The bus URL of the first controller's services."""
        if self.etcd:
            return self.etcd_url(0)
        return 'redis://127.0.0.1:%d?timeout=10' % self.ports.redis

    def etcd_url(self, member):
        return 'etcd3+http://127.0.0.1:%d?api_version=v3&timeout=10' % (
            self.ports.etcd_client(member))

    def extra_controllers(self):
        """The numbers of the controllers after the first (2, 3, ...)."""
        return range(2, self.settings.controllers + 1)

    def controller_bus_url(self, controller):
        """Controller ``controller``'s (1, 2, ...) local etcd member."""
        return self.etcd_url((controller - 1) % ETCD_MEMBERS)

    @property
    def agents_bus_url(self):
        """The compute nodes' agents' bus: the last etcd member, or Redis."""
        return self.etcd_url(ETCD_MEMBERS - 1) if self.etcd \
            else self.statebus_url

    def url(self, service, suffix=''):
        return 'http://127.0.0.1:%d%s' % (getattr(self.ports, service),
                                          suffix)

    @property
    def auth_url(self):
        return self.url('keystone', '/v3')

    @property
    def clouds_yaml(self):
        return self.path('etc', 'clouds.yaml')

    def admin_auth(self):
        """openstacksdk ``connect`` arguments for the admin user."""
        return dict(auth_url=self.auth_url, username='admin',
                    password=ADMIN_PASSWORD, project_name='admin',
                    user_domain_id='default', project_domain_id='default',
                    region_name=REGION, identity_api_version='3')
