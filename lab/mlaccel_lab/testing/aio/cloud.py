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

"""Bring an all-in-one cloud up and take it down.

The steps, with the slow ones overlapped: MariaDB, RabbitMQ and Redis;
keystone's schema and bootstrap while the other schemas sync; the catalog;
every service; the computes mapped to the cell; a test image and flavors.
"""

import concurrent.futures
import importlib.metadata
import json
import os
import shutil
import time

import requests

from mlaccel.cmd import cinder_config
from mlaccel.cmd import config as mlaccel_config
from mlaccel import inifile
from mlaccel.nova import actions
from mlaccel_lab.testing.aio import agents
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import pools
from mlaccel_lab.testing.aio import procs
from mlaccel_lab.testing import reflink

#: Services the others need; ``down`` stops them last.
INFRA = ('mariadb', 'epmd', 'rabbitmq', 'redis') + tuple(
    'etcd-%d' % member for member in range(aio_layout.ETCD_MEMBERS))
CINDER = ('cinder-api', 'cinder-scheduler', 'cinder-volume')
#: What every controller after the first runs, beside its pool manager.
CONTROLLER = ('nova-scheduler', 'cinder-scheduler')
#: The cinder backend section (file-backed volumes) the mirror wraps.
CINDER_BACKEND = 'file'

#: Seconds a service gets to stop gracefully before it is killed.
STOP_TIMEOUT = 30.0
#: Size of the sparse file system Cinder's volumes are on (GiB; it takes
#: only the space written).
VOLUME_FS_GB = 64

#: The image every test may boot: small raw bytes, made at bring-up.
TEST_IMAGE_BYTES = 1024 * 1024


class Clock:
    """Times each step since the last; prints it unless ``quiet``."""

    def __init__(self, quiet=False):
        self.quiet = quiet
        self.start = time.monotonic()
        self.steps = {}
        self._last = self.start

    def mark(self, step):
        now = time.monotonic()
        self.steps[step] = round(now - self._last, 1)
        self._last = now
        if not self.quiet:
            print('[aio +%5.1fs] %s (%.1f s)' % (
                now - self.start, step, self.steps[step]), flush=True)

    def total(self):
        return round(time.monotonic() - self.start, 1)

    def summary(self):
        """``'step 1.2 s, step 0.4 s'``: every step so far, in order."""
        return ', '.join('%s %.1f s' % (step, seconds)
                         for step, seconds in self.steps.items())


def _mysql(lay, sql):
    procs.run(lay, 'mariadb-setup', [
        'mariadb', '-uroot', '-S', lay.path('run', 'mysqld.sock'), '-e', sql])


def _erl(lay):
    return {'ERL_EPMD_PORT': str(lay.ports.epmd),
            'ERL_EPMD_ADDRESS': '127.0.0.1'}


def start_rabbitmq(lay):
    """Start RabbitMQ (epmd running); it listens on ``amqp`` soon after."""
    rabbit_home = lay.path('run', 'rabbitmq')
    os.makedirs(rabbit_home, exist_ok=True)
    plugins = os.path.join(rabbit_home, 'enabled_plugins')
    with open(plugins, 'w') as f:
        f.write('[].\n')
    with open(os.path.join(rabbit_home, 'rabbitmq.conf'), 'w') as f:
        f.write('loopback_users = none\n')
    # The real server, not the /usr/sbin wrapper that drops the env.
    procs.start(lay, 'rabbitmq', ['/usr/lib/rabbitmq/bin/rabbitmq-server'],
                env=dict(_erl(lay), **{
                    'HOME': rabbit_home,
                    'RABBITMQ_NODENAME': 'rabbit_mlaccel_aio@localhost',
                    'RABBITMQ_NODE_IP_ADDRESS': '127.0.0.1',
                    'RABBITMQ_NODE_PORT': str(lay.ports.amqp),
                    'RABBITMQ_DIST_PORT': str(lay.ports.amqp + 1),
                    'RABBITMQ_MNESIA_BASE': lay.path('data', 'rabbitmq'),
                    'RABBITMQ_LOG_BASE': lay.path('log', 'rabbitmq'),
                    'RABBITMQ_ENABLED_PLUGINS_FILE': plugins,
                    'RABBITMQ_CONFIG_FILE': os.path.join(rabbit_home,
                                                         'rabbitmq'),
                }))


def start_infra(lay):
    mysql_data = lay.path('data', 'mysql')
    if not os.path.isdir(os.path.join(mysql_data, 'mysql')):
        procs.run(lay, 'mariadb-install', [
            'mariadb-install-db', '--no-defaults', '--datadir=' + mysql_data,
            '--user=root', '--auth-root-authentication-method=normal',
            '--skip-test-db'])
    procs.start(lay, 'mariadb', [
        'mariadbd', '--no-defaults', '--datadir=' + mysql_data,
        '--user=root', '--bind-address=127.0.0.1',
        '--port=%d' % lay.ports.db,
        '--socket=' + lay.path('run', 'mysqld.sock'),
        '--pid-file=' + lay.path('run', 'mysqld.pid'),
        '--max-connections=500', '--innodb-buffer-pool-size=256M',
        '--innodb-flush-log-at-trx-commit=0', '--skip-name-resolve',
        '--character-set-server=utf8mb4'])
    # epmd is started by us, so that it is recorded and stopped like the
    # rest; RabbitMQ finds it on ERL_EPMD_PORT.
    procs.start(lay, 'epmd', ['epmd', '-port', str(lay.ports.epmd),
                              '-address', '127.0.0.1'], env=_erl(lay))
    procs.wait_port(lay, 'epmd', lay.ports.epmd, 20)
    start_rabbitmq(lay)
    if lay.etcd:
        start_etcd(lay)
    else:
        procs.start(lay, 'redis', [
            'redis-server', '--bind', '127.0.0.1', '--port',
            str(lay.ports.redis), '--save', '', '--appendonly', 'no',
            '--dir', lay.path('run')])
    deadline = time.monotonic() + 60
    while True:
        try:
            _mysql(lay, 'SELECT 1')
            break
        except procs.ServiceError:
            if time.monotonic() > deadline or not procs.running(lay,
                                                                'mariadb'):
                raise
            time.sleep(0.5)
    _mysql(lay, "CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY "
           "'%s';" % (aio_layout.DB_USER, aio_layout.DB_PASSWORD) + ''.join(
               "CREATE DATABASE IF NOT EXISTS %s; GRANT ALL ON %s.* TO "
               "'%s'@'127.0.0.1';" % (db, db, aio_layout.DB_USER)
               for db in aio_layout.DATABASES))
    if lay.etcd:
        for member in range(aio_layout.ETCD_MEMBERS):
            procs.wait_port(lay, 'etcd-%d' % member,
                            lay.ports.etcd_client(member), 60,
                            probe=etcd_serves)
    else:
        procs.wait_port(lay, 'redis', lay.ports.redis, 30)
    procs.wait_port(lay, 'rabbitmq', lay.ports.amqp, 120)


def start_etcd(lay, member=None):
    """Start the etcd cluster's members (or one, again, with its data)."""
    ports = lay.ports
    initial = ','.join('etcd-%d=http://127.0.0.1:%d' % (m, ports.etcd_peer(m))
                       for m in range(aio_layout.ETCD_MEMBERS))
    for m in range(aio_layout.ETCD_MEMBERS) if member is None else [member]:
        client = 'http://127.0.0.1:%d' % ports.etcd_client(m)
        peer = 'http://127.0.0.1:%d' % ports.etcd_peer(m)
        procs.start(lay, 'etcd-%d' % m, [
            'etcd', '--name', 'etcd-%d' % m,
            '--data-dir', lay.path('data', 'etcd-%d' % m),
            '--listen-client-urls', client, '--advertise-client-urls', client,
            '--listen-peer-urls', peer,
            '--initial-advertise-peer-urls', peer,
            '--initial-cluster', initial, '--initial-cluster-state', 'new',
            '--initial-cluster-token', 'mlaccel-aio', '--log-level', 'warn'])


def etcd_serves(port):
    """Whether the etcd member on ``port`` serves a linearizable read."""
    try:
        requests.post('http://127.0.0.1:%d/v3/kv/range' % port,
                      json={'key': 'aGVhbHRo'},  # b'health'
                      timeout=1).raise_for_status()
        return True
    except requests.RequestException:
        return False


def _wsgi(lay, name, port, module, env=None, extra=()):
    """Start an API under uwsgi: one process, four threads, on loopback.

    uwsgi is pyuwsgi's: a wheel of this Python's ABI that runs in this
    interpreter, rather than a binary built from uWSGI's sdist, which
    embeds whichever libpython the build found (the system's, of another
    patch level than a pyenv Python or one built from source).
    """
    procs.start(lay, name, [
        lay.bin('uwsgi'), '--http-socket', '127.0.0.1:%d' % port,
        '--module', module, '--home', lay.venv, '--master',
        '--processes', '1', '--threads', '4', '--enable-threads',
        '--lazy-apps', '--die-on-term', '--need-app',
        '--buffer-size', '65535', '--http-keepalive',
        '--add-header', 'Connection: close', '--disable-logging',
        *extra], env=env)


def _manage(lay, name, *commands):
    for argv in commands:
        procs.run(lay, name, [lay.bin(argv[0]), *argv[1:]])


def bootstrap_keystone(lay):
    conf = ['--config-file', lay.path('etc', 'keystone', 'keystone.conf')]
    url = lay.auth_url
    _manage(lay, 'keystone-manage',
            ['keystone-manage', *conf, 'db_sync'],
            ['keystone-manage', *conf, 'fernet_setup',
             '--keystone-user', 'root', '--keystone-group', 'root'],
            ['keystone-manage', *conf, 'credential_setup',
             '--keystone-user', 'root', '--keystone-group', 'root'],
            ['keystone-manage', *conf, 'bootstrap',
             '--bootstrap-password', aio_layout.ADMIN_PASSWORD,
             '--bootstrap-region-id', aio_layout.REGION,
             '--bootstrap-admin-url', url, '--bootstrap-public-url', url,
             '--bootstrap-internal-url', url])


def sync_schemas(lay):
    """The other services' schemas; returns futures, run in parallel."""
    nova = ['--config-file', lay.path('etc', 'nova', 'nova.conf')]
    jobs = {
        'glance': [['glance-manage', '--config-dir',
                    lay.path('etc', 'glance'), 'db_sync']],
        'placement': [['placement-manage', '--config-dir',
                       lay.path('etc', 'placement'), 'db', 'sync']],
        'nova': [['nova-manage', *nova, 'api_db', 'sync'],
                 ['nova-manage', *nova, 'cell_v2', 'map_cell0',
                  '--database_connection', lay.db_url('nova_cell0')],
                 ['nova-manage', *nova, 'cell_v2', 'create_cell',
                  '--name', 'cell1'],
                 ['nova-manage', *nova, 'db', 'sync']],
    }
    if lay.settings.cinder:
        jobs['cinder'] = [['cinder-manage', '--config-file',
                           lay.path('etc', 'cinder', 'cinder.conf'),
                           'db', 'sync']]
    pool = concurrent.futures.ThreadPoolExecutor(len(jobs))
    futures = [pool.submit(_manage, lay, name + '-dbsync', *commands)
               for name, commands in jobs.items()]
    pool.shutdown(wait=False)
    return futures


def connect(lay):
    import openstack
    return openstack.connect(**lay.admin_auth())


def register_catalog(lay, conn):
    """Service project and users, services and endpoints."""
    identity = conn.identity
    project = identity.find_project('service') or identity.create_project(
        name='service', domain_id='default')
    roles = {name: identity.find_role(name) or identity.create_role(
        name=name) for name in ('admin', 'service')}
    users = list(aio_layout.SERVICE_USERS)
    if not lay.settings.cinder:
        users.remove('cinder')
    for name in users:
        user = identity.find_user(name) or identity.create_user(
            name=name, password=aio_layout.SERVICE_PASSWORD,
            domain_id='default', default_project_id=project.id)
        for role in roles.values():
            identity.assign_project_role_to_user(project, user, role)
    services = [('glance', 'image', lay.url('glance')),
                ('placement', 'placement', lay.url('placement')),
                ('nova', 'compute', lay.url('nova', '/v2.1')),
                ('neutron', 'network', lay.url('neutron'))]
    if lay.settings.cinder:
        services.append(('cinderv3', 'block-storage',
                         lay.url('cinder', '/v3/$(project_id)s')))
    for name, kind, url in services:
        service = identity.find_service(name) or identity.create_service(
            name=name, type=kind)
        have = {endpoint.interface for endpoint in
                identity.endpoints(service_id=service.id)}
        for interface in {'public', 'internal', 'admin'} - have:
            identity.create_endpoint(service_id=service.id, url=url,
                                     interface=interface,
                                     region_id=aio_layout.REGION)


def start_services(lay):
    etc = lay.path('etc')
    _wsgi(lay, 'glance', lay.ports.glance, 'glance.wsgi.api:application',
          env={'OS_GLANCE_CONFIG_DIR': os.path.join(etc, 'glance')},
          extra=('--http-chunked-input', '--http-raw-body',
                 '--http-auto-chunked'))
    _wsgi(lay, 'placement', lay.ports.placement,
          'placement.wsgi.api:application',
          env={'OS_PLACEMENT_CONFIG_DIR': os.path.join(etc, 'placement')})
    _wsgi(lay, 'neutron', lay.ports.neutron,
          'mlaccel_lab.testing.aio.fake_neutron:application')
    # nova-api reads api-paste.ini and nova.conf from this folder.
    _wsgi(lay, 'nova-api', lay.ports.nova,
          'nova.wsgi.osapi_compute:application',
          env={'OS_NOVA_CONFIG_DIR': os.path.join(etc, 'nova')})
    procs.start(lay, 'nova-conductor', [
        lay.bin('nova-conductor'), '--config-file',
        os.path.join(etc, 'nova', 'nova.conf')])
    for controller in controllers(lay):
        start_controller_service(lay, 'nova-scheduler', controller)
    if lay.settings.cinder:
        cinder_conf = ['--config-file',
                       os.path.join(etc, 'cinder', 'cinder.conf')]
        _wsgi(lay, 'cinder-api', lay.ports.cinder,
              'cinder.wsgi.api:application',
              extra=('--pyargv', ' '.join(cinder_conf)))
        for controller in controllers(lay):
            start_controller_service(lay, 'cinder-scheduler', controller)
        procs.start(lay, 'cinder-volume', [lay.bin('cinder-volume'),
                                           *cinder_conf])
    for name in ('glance', 'placement', 'neutron', 'nova-api') + (
            ('cinder-api',) if lay.settings.cinder else ()):
        port = getattr(lay.ports, name.replace('-api', ''))
        procs.wait_port(lay, name, port, 120, probe=procs.http_answers)


def controllers(lay):
    """The cloud's controllers, numbered from 1."""
    return range(1, lay.settings.controllers + 1)


def controller_service(name, controller):
    """Service ``name`` (e.g. nova-scheduler) of controller 1, 2, ..."""
    return name if controller == 1 else '%s-controller%d' % (name, controller)


def start_controller_service(lay, name, controller=1):
    """Start ``name`` (one of :data:`CONTROLLER`) of ``controller``."""
    service = name.split('-')[0]
    argv = [lay.bin(name), '--config-file',
            lay.path('etc', service, service + '.conf')]
    if controller > 1:
        argv += ['--config-file',
                 configs.controller_file(lay, service, controller)]
    return procs.start(lay, controller_service(name, controller), argv)


def start_compute(lay, host, agent=True):
    """Start nova-compute on ``host`` and, with mlaccel, its agent."""
    argv = [lay.bin('python'), '-m', 'mlaccel_lab.testing.compute']
    for path in configs.compute_config_files(lay, host):
        argv += ['--config-file', path]
    procs.start(lay, 'nova-compute-' + host, argv)
    if agent and lay.settings.mlaccel:
        agents.start(lay, host)


def stop_compute(lay, host, agent=True, timeout=STOP_TIMEOUT):
    """Stop nova-compute on ``host`` and its agent with it."""
    if agent:
        procs.stop(lay, agents.service(host), timeout)
    procs.stop(lay, 'nova-compute-' + host, timeout)


def reported_since(service, since):
    """Whether the service reported in after ``since`` (UNIX time).

    A restarted service's record still says "up" from its previous run.
    """
    when = actions.parse_time(service.updated_at)
    return service.state == 'up' and when is not None and when >= since - 1


def wait_service_up(lay, conn, binary, since, timeout=120.0):
    """Wait until the service started at ``since`` reports in."""
    _wait_service_up(lay, conn, binary, since, time.monotonic() + timeout)


def wait_compute_up(lay, conn, host, since, timeout=120.0):
    """Wait until nova-compute on ``host``, started at ``since``, is up."""
    deadline = time.monotonic() + timeout
    while not any(reported_since(svc, since) for svc in
                  conn.compute.services(binary='nova-compute', host=host)):
        if not procs.running(lay, 'nova-compute-' + host):
            raise procs.ServiceError('nova-compute on %s died:\n%s' % (
                host, procs.tail(lay, 'nova-compute-' + host)))
        if time.monotonic() > deadline:
            raise procs.ServiceError('nova-compute on %s is not up' % host)
        time.sleep(0.5)


def _wait_service_up(lay, conn, binary, since, deadline, api='compute'):
    """Wait for ``binary`` in the service list of ``api`` (the proxy).

    ``api`` is ``compute`` (Nova's services) or ``block_storage``.
    """
    while True:
        try:
            if any(reported_since(svc, since) for svc in
                   getattr(conn, api).services(binary=binary)):
                return
        except Exception:  # nova-api may still be loading its app
            pass
        if not procs.running(lay, binary):
            raise procs.ServiceError('%s died:\n%s'
                                     % (binary, procs.tail(lay, binary)))
        if time.monotonic() > deadline:
            raise procs.ServiceError('%s is not up' % binary)
        time.sleep(0.5)


def start_computes(lay, conn, since, timeout=180):
    """Start the computes, wait for their nodes, map them to the cell.

    The computes start once the conductor started at ``since`` (UNIX
    time) answers: a compute that asks too early waits a whole RPC timeout.
    """
    deadline = time.monotonic() + timeout
    _wait_service_up(lay, conn, 'nova-conductor', since, deadline)
    since = time.time()
    for host in lay.compute_hosts():
        start_compute(lay, host)
    want = set(lay.compute_hosts())
    while True:
        up = {svc.host for svc in conn.compute.services(binary='nova-compute')
              if reported_since(svc, since)}
        if want <= up:
            break
        for host in want - up:
            if not procs.running(lay, 'nova-compute-' + host):
                raise procs.ServiceError('nova-compute on %s died:\n%s' % (
                    host, procs.tail(lay, 'nova-compute-' + host)))
        if time.monotonic() > deadline:
            raise procs.ServiceError('computes not up: %s'
                                     % sorted(want - up))
        time.sleep(1)
    while True:
        _manage(lay, 'discover-hosts', [
            'nova-manage', '--config-file',
            lay.path('etc', 'nova', 'nova.conf'), 'cell_v2',
            'discover_hosts'])
        mapped = {hv.name for hv in conn.compute.hypervisors()}
        if want <= mapped:
            return
        if time.monotonic() > deadline:
            raise procs.ServiceError('compute nodes not mapped: %s'
                                     % sorted(want - mapped))
        time.sleep(2)


def make_test_resources(lay, conn):
    """A small raw image and two flavors, saved in ``run/cloud.json``."""
    image = conn.image.find_image('mlaccel-aio-tiny')
    if image is None:
        image = conn.image.create_image(
            name='mlaccel-aio-tiny', data=os.urandom(TEST_IMAGE_BYTES),
            disk_format='raw', container_format='bare', visibility='public')
    flavors = {}
    for name, ram in (('m1.aio', 128), ('m1.aio-alt', 192)):
        flavor = conn.compute.find_flavor(name) or \
            conn.compute.create_flavor(name=name, ram=ram, vcpus=1, disk=1)
        flavors[name] = flavor.id
    # Bursts of test servers larger than Nova's default quota of 10, and
    # as many boot volumes (warm pools of volume-backed members included).
    conn.set_compute_quotas(conn.current_project_id, instances=-1,
                            cores=-1, ram=-1)
    if lay.settings.cinder:
        conn.set_volume_quotas(conn.current_project_id, volumes=-1,
                               gigabytes=-1, snapshots=-1)
    cloud = {'image_id': image.id, 'flavor_id': flavors['m1.aio'],
             'flavor_alt_id': flavors['m1.aio-alt']}
    with open(lay.cloud_file, 'w') as f:
        json.dump(cloud, f, indent=1)
    return cloud


def trust_admin_images(lay, project_id):
    """Images of the admin project may be marked hot for pre-warm.

    The operator's setting that keystone's bootstrap decides: the admin
    project's id (see ``[mlaccel_cinder] hot_image_owners``).
    """
    ini = inifile.IniFile(lay.path('etc', 'cinder', 'cinder.conf'))
    ini.set('mlaccel_cinder', 'hot_image_owners', [project_id])
    ini.save()


def enable_mlaccel(lay):
    """The same edit the devstack plugin makes, by the same command."""
    argv = ['enable', '--nova-conf', lay.path('etc', 'nova', 'nova.conf'),
            '--statebus-url', lay.statebus_url]
    if lay.settings.cinder:
        _check_cinder_weigher()
        argv += ['--cinder-conf', lay.path('etc', 'cinder', 'cinder.conf'),
                 '--cinder-mirror-backend', CINDER_BACKEND]
    if mlaccel_config.main(argv):
        raise procs.ServiceError('mlaccel-config failed')


def _check_cinder_weigher():
    """cinder-scheduler finds GoldenImageWeigher by its entry point.

    An install of mlaccel older than the entry point would fail every
    volume request at the scheduler; say so before anything starts.
    """
    group = 'cinder.scheduler.weights'
    names = {ep.name for ep in importlib.metadata.entry_points(group=group)}
    if cinder_config.WEIGHER not in names:
        raise procs.ServiceError(
            '%s is not registered in %s of this environment: reinstall '
            'mlaccel (pip install -e .)' % (cinder_config.WEIGHER, group))


def set_cinder_mirror(lay, enabled, conn=None):
    """Switch the mirror-volume driver of the ``file`` backend on or off.

    Edits cinder.conf as ``mlaccel-config`` does (the driver and
    ``GoldenImageWeigher``), then restarts cinder-scheduler and
    cinder-volume; returns once both report in. Off, volumes from images
    take stock Cinder's path (no image-volume cache).
    """
    ini = inifile.IniFile(lay.path('etc', 'cinder', 'cinder.conf'))
    if enabled:
        cinder_config.enable_mirror(ini, [CINDER_BACKEND])
    else:
        cinder_config.disable_mirror(ini)
    ini.save()
    restart_cinder(lay, conn, mirror=enabled)


def restart_cinder(lay, conn=None, timeout=120.0, mirror=None):
    """Restart cinder-scheduler and cinder-volume; wait until they serve.

    That is: both report in, and cinder-scheduler knows the backend's pool
    (cinder-volume's capabilities reach it after its first heartbeat; a
    volume created before then fails with "no valid backend"). ``mirror``,
    if not None: whether that pool must say it runs the mirror-volume
    driver.
    """
    conn = conn or connect(lay)
    argv = ['--config-file', lay.path('etc', 'cinder', 'cinder.conf')]
    since = time.time()
    for controller in controllers(lay):
        procs.stop(lay, controller_service('cinder-scheduler', controller),
                   STOP_TIMEOUT)
        start_controller_service(lay, 'cinder-scheduler', controller)
    procs.stop(lay, 'cinder-volume', STOP_TIMEOUT)
    procs.start(lay, 'cinder-volume', [lay.bin('cinder-volume'), *argv])
    deadline = time.monotonic() + timeout
    for name in CINDER[1:]:
        _wait_service_up(lay, conn, name, since, deadline, 'block_storage')
    while True:
        try:
            pools = list(conn.block_storage.backend_pools(details=True))
        except Exception:  # cinder-scheduler may not answer yet
            pools = []
        if pools and (mirror is None or all(
                bool((p.capabilities or {}).get('mlaccel_mirror')) == mirror
                for p in pools)):
            return
        if time.monotonic() > deadline:
            raise procs.ServiceError(
                'cinder-scheduler knows no pool%s after a restart' % (
                    '' if mirror is None else ' with the mirror-volume '
                    'driver %s' % ('on' if mirror else 'off')))
        time.sleep(0.5)


def up(lay):
    """Bring the cloud up; return the per-step and total seconds.

    Nothing starts while another process holds one of the cloud's ports:
    the error names each holder. A bring-up that fails stops what it
    started (the logs stay) before the error goes on.
    """
    if procs.recorded(lay):
        raise procs.ServiceError('services of %s are recorded as running; '
                                 'run "down" first' % lay.base)
    held = procs.held_message(lay.ports.all())
    if held:
        raise procs.ServiceError('the cloud\'s ports are in use: %s' % held)
    try:
        return _up(lay)
    except BaseException:
        print('[aio] bring-up failed; stopping what it started', flush=True)
        try:
            down(lay)
        except procs.ServiceError as exc:
            print('[aio] %s' % exc, flush=True)
        raise


def _up(lay):
    clock = Clock()
    first = not os.path.exists(lay.path('run', 'bootstrapped'))
    lay.save_settings()
    configs.write_all(lay)
    if lay.settings.mlaccel:
        enable_mlaccel(lay)
        agents.write_configs(lay)
    clock.mark('configuration written')
    start_infra(lay)
    clock.mark('MariaDB, RabbitMQ, %s up' % (
        'etcd' if lay.etcd else 'Redis'))
    futures = sync_schemas(lay) if first else []
    if first:
        bootstrap_keystone(lay)
        clock.mark('keystone bootstrapped')
    _wsgi(lay, 'keystone', lay.ports.keystone, 'keystone.wsgi.api:application',
          env={'OS_KEYSTONE_CONFIG_DIR': lay.path('etc', 'keystone')})
    procs.wait_port(lay, 'keystone', lay.ports.keystone, 60,
                    probe=procs.http_answers)
    conn = connect(lay)
    if lay.settings.cinder:
        trust_admin_images(lay, conn.current_project_id)
    if first:
        register_catalog(lay, conn)
        # A new token, so that the catalog has the services just made.
        conn = connect(lay)
        clock.mark('catalog registered')
        for future in futures:
            future.result()
        clock.mark('schemas synced')
    if lay.settings.cinder:
        print('[aio] volume clones: %s' % mount_volumes(lay), flush=True)
    since = time.time()
    start_services(lay)
    clock.mark('APIs listening')
    start_computes(lay, conn, since)
    clock.mark('%d computes up and mapped' % lay.settings.computes)
    make_test_resources(lay, conn)
    if lay.settings.mlaccel:
        pools.write_config(lay)
        pools.start_managers(lay)
    open(lay.path('run', 'bootstrapped'), 'w').close()
    clock.mark('test image and flavors ready')
    result = {'steps': clock.steps, 'total_seconds': clock.total()}
    with open(lay.path('run', 'bringup.json'), 'w') as f:
        json.dump(result, f, indent=1)
    print('[aio] up in %.1f s: %s' % (clock.total(), lay.base), flush=True)
    return result


def mount_volumes(lay):
    """Put the volume directory on an XFS with reflink; say how it clones.

    The file system is a sparse file beside the directory, loop-mounted on
    it until :func:`down`; one already mounted (a cloud brought up again)
    is kept. Without reflink (not root, no xfsprogs, no loop device, or
    ``reflink_volumes`` off) the directory stays where it is and every
    clone copies. What was chosen goes to ``run/volumes.json``.
    """
    directory = configs.volume_dir(lay)
    os.makedirs(directory, exist_ok=True)
    if not lay.settings.reflink_volumes:
        how = 'plain copies (reflink_volumes is off)'
    elif reflink.has_reflink(directory):
        how = 'reflink (the file system of %s has it)' % directory
    else:
        device, why = reflink.mount_xfs(
            lay.path('data', 'cinder', 'volumes.xfs'), directory,
            VOLUME_FS_GB)
        how = ('reflink (XFS on loop device %s)' % device if why is None
               else 'plain copies (%s)' % why)
    with open(lay.path('run', 'volumes.json'), 'w') as f:
        json.dump({'clones': how}, f)
    return how


def volume_clones(lay):
    """How the running cloud's volume clones are made, as brought up."""
    try:
        with open(lay.path('run', 'volumes.json')) as f:
            return json.load(f)['clones']
    except (OSError, ValueError, KeyError):
        return 'unknown (the cloud was brought up without saying)'


def unmount_volumes(lay):
    """Unmount what :func:`mount_volumes` mounted, if anything."""
    if os.path.ismount(configs.volume_dir(lay)):
        reflink.unmount(configs.volume_dir(lay))
        return True
    return False


def stop_waves(recorded):
    """The services ``recorded``, in the waves they are stopped in.

    mlaccel's services first (a pool manager deletes the members it was
    building through Nova's API), then OpenStack's, then what they were
    using. A wave stops all at once, each service taking its graceful
    shutdown time.
    """
    ours = [name for name in recorded if name.startswith('mlaccel-')]
    return [ours,
            [name for name in recorded
             if name not in INFRA and name not in ours],
            [name for name in INFRA if name in recorded]]


def down(lay, purge=False, keep_logs=False):
    """Stop every recorded service, sweep leftovers, optionally purge.

    :param keep_logs: with ``purge``, remove all but the services' logs.
    """
    clock = Clock()
    killed = []
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for wave in stop_waves(procs.recorded(lay)):
            for name, was_killed in zip(wave, pool.map(
                    lambda name: procs.stop(lay, name, STOP_TIMEOUT),
                    wave)):
                if was_killed:
                    killed.append(name)
    # Services take their graceful shutdown time; only one that did not
    # end within it is worth a word.
    if killed:
        print('[aio] killed after the graceful stop timed out: %s'
              % ', '.join(killed))
    # Guests of a killed compute, or anything else the cloud spawned.
    left = procs.sweep(lay.base)
    if left:
        print('[aio] ended %d leftover processes: %s' % (len(left), left))
    clock.mark('stopped')
    if unmount_volumes(lay):
        clock.mark('volume file system unmounted')
    if purge and keep_logs:
        for name in os.listdir(lay.base):
            path = os.path.join(lay.base, name)
            if path == lay.log:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        clock.mark('removed %s but its logs' % lay.base)
    elif purge:
        shutil.rmtree(lay.base, ignore_errors=True)
        clock.mark('removed %s' % lay.base)
    remaining = procs.marked(lay.base)
    if remaining:
        raise procs.ServiceError('processes still running: %s' % remaining)
    return clock.total()


def status(lay):
    """``{service: running}`` of the recorded services."""
    return {name: procs.running(lay, name) for name in procs.recorded(lay)}
