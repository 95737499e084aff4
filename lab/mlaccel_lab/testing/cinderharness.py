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

"""Cinder's in-process harness with the mirror-volume driver over files.

The driver wraps the file-backed test backend and reads a file-backed
image service, for the functional tests and the benchmark. Cinder must be
imported after its concurrency mode is set (``cinder.monkey_patch.patch()``).

Real: Cinder's API, scheduler and volume manager (sqlite, fake messaging
whose listeners wake on delivery),
the volume driver, the bytes in files. Replaced, because it cannot run in
this process: Glance, by
:class:`mlaccel_lab.testing.fileimages.FileImageService`.
"""

import atexit
import contextlib
import hashlib
import logging
import os
import socketserver
import sys
import tempfile
import threading
import time
from wsgiref import simple_server

from eventlet import tpool
import fixtures
from oslo_config import cfg
from oslo_messaging._drivers import impl_fake
from oslo_service import wsgi as oslo_wsgi
import sqlalchemy

from cinder.db import api as db_api
from cinder.db import migration
from cinder.image import glance
from cinder import monkey_patch
from cinder import privsep
from cinder.tests.functional.api import client
from cinder.tests.functional import functional_helpers
from cinder.tests.unit import fake_constants as fake
from cinder.tests.unit import known_issues
from cinder.tests.unit import test as cinder_test
from cinder.volume import configuration

from mlaccel.cinder import golden
from mlaccel import conf as mlaccel_conf
from mlaccel_lab.testing import fileimages
from mlaccel_lab.testing import filevolume

CONF = cfg.CONF
MIB = 1024 * 1024
INTERNAL_PROJECT = 'f0f0f0f0-0000-4000-8000-00000000c1de'
INTERNAL_USER = 'f0f0f0f0-0000-4000-8000-00000000a5e7'
MIRROR = 'mlaccel.cinder.driver.MirrorVolumeDriver'
BACKEND = 'mlaccel_lab.testing.filevolume.FileVolumeDriver'


def image_bytes(seed, size):
    """``size`` bytes that differ per ``seed`` (cheap, not random)."""
    block = hashlib.sha512(seed.encode()).digest() * (MIB // 64)
    return (block * (size // MIB + 1))[:size]


class MirrorTestBase(functional_helpers._FunctionalTestBase):
    VOLUME_DRIVER = MIRROR
    CACHE_FLAGS = {}
    BACKEND_FLAGS = {}
    #: Directory under which each test's files go (images, volumes, the
    #: image conversion directory); None: the default temporary directory.
    SCRATCH = None

    def setUp(self):
        mlaccel_conf.register_opts(CONF)
        CONF.register_opts(filevolume.OPTS,
                           group=configuration.SHARED_CONF_GROUP)
        self.tmp = self.useFixture(fixtures.TempDir(self.SCRATCH)).path
        self.images = fileimages.FileImageService(
            os.path.join(self.tmp, 'images'), owner=fake.PROJECT_ID)
        os.makedirs(self.images.directory)
        for name in ('get_remote_image_service',):
            self._patch(glance, name,
                        lambda ctx, href: (self.images.session(), href))
        self._patch(glance, 'get_default_image_service',
                    lambda: self.images.session())
        _file_database(self)
        _prompt_delivery(self)
        privsep.sys_admin_pctxt.set_client_mode(False)
        if not monkey_patch.is_patched():
            # Cinder's image fetch runs through eventlet's tpool even on
            # native threads; its hub then belongs to a worker thread and
            # the base class's tpool.killall() from this thread would fail.
            self._patch(known_issues, 'TPOOL_KILLALL_ISSUE', True)
            # The stock driver runs need what the mirror-volume driver does
            # on start (mlaccel.cinder.driver._native_threads_tpool); the
            # mirror runs test that it does.
            if self.VOLUME_DRIVER == BACKEND:
                self._patch(tpool, '_nthreads', 0)
            else:
                self._patch(tpool, '_nthreads', tpool._nthreads)
        super().setUp()
        self.addCleanup(privsep.sys_admin_pctxt.set_client_mode, True)
        self.mlaccel_log = self.useFixture(fixtures.FakeLogger(
            name='mlaccel', level=logging.INFO, nuke_handlers=False))
        self.driver = self.volume.manager.driver

    def _patch(self, module, name, value):
        original = getattr(module, name)
        setattr(module, name, value)
        self.addCleanup(setattr, module, name, original)

    def start_service(self, name, host=None, **kwargs):
        svc = super().start_service(name, host=host, **kwargs)
        mirror = getattr(getattr(svc.manager, 'driver', None), 'mirror',
                         None)
        if mirror is not None:
            # Its background tasks end with the test.
            self.addCleanup(mirror.stop)
        return svc

    def _start_api_service(self):
        # Cinder's helper serves the API with oslo.service's eventlet WSGI
        # server, which refuses the native-thread backend, and looks for
        # api-paste.ini in a source tree. Serve the same paste app with the
        # standard library's threaded WSGI server instead, in both modes.
        CONF.api_paste_config = _api_paste()
        self.osapi = _WSGIServer(
            oslo_wsgi.Loader(CONF).load_app('osapi_volume'))
        self.auth_url = 'http://127.0.0.1:%d/v%s' % (
            self.osapi.port, self._osapi_version.split('.')[0])

    def _get_flags(self):
        f = super()._get_flags()
        shared = configuration.SHARED_CONF_GROUP
        f['volume_driver'] = {'v': self.VOLUME_DRIVER, 'g': shared}
        f['mlaccel_file_volume_dir'] = {
            'v': os.path.join(self.tmp, 'volumes'), 'g': shared}
        f['image_conversion_dir'] = {'v': os.path.join(self.tmp, 'conv')}
        f['cinder_internal_tenant_project_id'] = {'v': INTERNAL_PROJECT}
        f['cinder_internal_tenant_user_id'] = {'v': INTERNAL_USER}
        f['backend_driver'] = {'v': BACKEND, 'g': 'mlaccel_cinder'}
        f['pool_size'] = {'v': 0, 'g': 'mlaccel_cinder'}
        # Tests run the pre-warm task's passes themselves.
        f['prewarm_interval'] = {'v': 0, 'g': 'mlaccel_cinder'}
        # A state bus of this test's own (tooz's file driver).
        f['backend_url'] = {'v': 'file://' + os.path.join(self.tmp, 'bus'),
                            'g': 'mlaccel_statebus'}
        f['refresh_interval'] = {'v': 0.2, 'g': 'mlaccel_statebus'}
        # The backends' reports go unsigned here: signatures are the state
        # bus's tests' business (tests/unit/statebus).
        f['allow_unsigned_reports'] = {'v': True, 'g': 'mlaccel_statebus'}
        # One SQLite file behind one lock: under heavy copying a heartbeat
        # can wait long for it; a backend must not be declared down then.
        f['service_down_time'] = {'v': 600}
        for k, v in self.CACHE_FLAGS.items():
            f[k] = {'v': v, 'g': 'mlaccel_cinder'}
        for k, v in self.BACKEND_FLAGS.items():
            f[k] = {'v': v, 'g': shared}
        return f

    # -- helpers ----------------------------------------------------------

    @property
    def mirror(self):
        return self.driver.mirror

    @property
    def backend(self):
        return self.driver._get_driver()

    def new_client(self):
        return client.TestOpenStackClient(fake.USER_ID, fake.PROJECT_ID,
                                          self.auth_url, self._osapi_version)

    def create(self, image_id, size=1, api=None):
        api = api or self.api
        return api.post_volume({'volume': {'size': size,
                                           'imageRef': image_id}})['id']

    def wait(self, volume_id, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.api.get_volume(volume_id)
            if v['status'] not in ('creating', 'downloading'):
                return v
            time.sleep(0.1)
        self.fail('volume %s still %s after %s s'
                  % (volume_id, v['status'], timeout))

    def wait_gone(self, volume_id, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.api.get_volume(volume_id)
            except client.OpenStackApiException404:
                return
            time.sleep(0.1)
        self.fail('volume %s not deleted after %s s' % (volume_id, timeout))

    def burst(self, image_id, n):
        """Create ``n`` volumes from an image at once; their ids."""
        ids = [None] * n
        errors = []

        def one(i):
            try:
                ids[i] = self.create(image_id, api=self.new_client())
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], errors)
        return ids

    def volume_path(self, volume_id):
        from cinder import context
        from cinder import objects
        volume = objects.Volume.get_by_id(context.get_admin_context(),
                                          volume_id)
        return os.path.join(CONF.backend_defaults.mlaccel_file_volume_dir,
                            volume.name)

    def assertHoldsImage(self, volume_id, image_id):
        with open(self.images.path(image_id), 'rb') as f:
            want = f.read()
        with open(self.volume_path(volume_id), 'rb') as f:
            got = f.read(len(want))
            self.assertEqual(b'', f.read(MIB).strip(b'\0'))
        self.assertEqual(hashlib.sha256(want).hexdigest(),
                         hashlib.sha256(got).hexdigest())

    def golden_rows(self):
        from cinder import context
        from cinder import objects
        ctx = context.get_admin_context()
        return [v for v in objects.VolumeList.get_all(ctx)
                if v.project_id == INTERNAL_PROJECT
                and golden.IMAGE_KEY in v.metadata]

    def create_seconds(self, volume_id):
        """Seconds from the API's accepting a volume to its being created."""
        from cinder import context
        from cinder import objects
        v = objects.Volume.get_by_id(context.get_admin_context(), volume_id)
        return (v.launched_at - v.created_at).total_seconds()

    def volume_times(self, volume_id):
        from cinder import context
        from cinder import objects
        v = objects.Volume.get_by_id(context.get_admin_context(), volume_id)
        return v.created_at, v.launched_at

    def restart_volume_service(self):
        """Stop cinder-volume and start it again on the same host."""
        host = self.volume.host
        self.volume.stop()
        self._services.remove(self.volume)
        self.volume = self.start_service('volume', host=host)
        self.driver = self.volume.manager.driver

    def volume_files(self):
        d = CONF.backend_defaults.mlaccel_file_volume_dir
        return sorted(n for n in os.listdir(d) if n.startswith('volume-'))


_DB_PATH = os.path.join(tempfile.gettempdir(),
                        'mlaccel-cinder-functional-%d.sqlite' % os.getpid())


def _file_database(testcase):
    """Give each test a fresh SQLite file instead of Cinder's in-memory DB.

    Cinder's harness shares one in-memory SQLite connection between all
    threads; on native threads concurrent transactions collide on it. With
    a file, each user gets its own connection, and one process-wide
    re-entrant lock, held from a connection's checkout to its checkin, keeps
    SQLite's deferred transactions from deadlocking each other ("database
    is locked"). The schema is made once per process (the engine keeps this
    one path).
    """
    for suffix in ('', '-journal', '-wal'):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_DB_PATH + suffix)
    CONF.set_override('connection', 'sqlite:///' + _DB_PATH, 'database')
    testcase.addCleanup(CONF.clear_override, 'connection', 'database')
    if cinder_test.DB_SCHEMA is None:
        engine = db_api.get_engine()
        migration.db_sync()
        with engine.connect() as conn:
            cinder_test.DB_SCHEMA = ''.join(conn.connection.iterdump())
        engine.dispose()
        os.unlink(_DB_PATH)
        sqlalchemy.event.listen(engine, 'checkout', _db_checkout)
        sqlalchemy.event.listen(engine, 'checkin', _db_checkin)
        atexit.register(_remove_database)


class _Delivery:
    """Wakes the fake message transport's listeners on each delivery.

    The harness's transport is oslo.messaging's fake driver, whose
    listeners look at their queues every 50 ms: up to 50 ms per RPC hop
    (API to scheduler, scheduler to volume), where a broker hands a message
    over in about a millisecond. Every request of every configuration pays
    it alike; with it gone what is measured is Cinder's work. A wake-up
    that comes between a listener's look and its wait is missed, and that
    listener waits the 50 ms as before.
    """

    def __init__(self):
        self._cond = threading.Condition()
        self.time = time.time

    def delivered(self):
        with self._cond:
            self._cond.notify_all()

    def sleep(self, seconds):
        with self._cond:
            self._cond.wait(seconds)


DELIVERY = _Delivery()


def _prompt_delivery(testcase):
    """The fake transport delivers at once (see :class:`_Delivery`)."""
    deliver = impl_fake.FakeExchange.deliver_message

    def deliver_message(exchange, *args, **kwargs):
        deliver(exchange, *args, **kwargs)
        DELIVERY.delivered()

    testcase._patch(impl_fake.FakeExchange, 'deliver_message',
                    deliver_message)
    testcase._patch(impl_fake, 'time', DELIVERY)


def prompt_delivery():
    """Whether the fake transport wakes its listeners on delivery now."""
    return impl_fake.time is DELIVERY


_DB_LOCK = threading.RLock()


def _db_checkout(dbapi_connection, record, proxy):
    _DB_LOCK.acquire()
    record.info['mlaccel_locked'] = threading.get_ident()


def _db_checkin(dbapi_connection, record):
    if record.info.pop('mlaccel_locked', None) is not None:
        _DB_LOCK.release()


def _remove_database():
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_DB_PATH)


def _api_paste():
    for prefix in (sys.prefix, '/usr/local', '/usr'):
        path = os.path.join(prefix, 'etc', 'cinder', 'api-paste.ini')
        if os.path.exists(path):
            return path
    raise RuntimeError('api-paste.ini of cinder not found')


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


class _ThreadingServer(socketserver.ThreadingMixIn,
                       simple_server.WSGIServer):
    daemon_threads = True


class _WSGIServer:
    """A paste app on a loopback port, served by threads."""

    def __init__(self, app):
        self._server = simple_server.make_server(
            '127.0.0.1', 0, app, server_class=_ThreadingServer,
            handler_class=_QuietHandler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        daemon=True)
        self._thread.start()

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
