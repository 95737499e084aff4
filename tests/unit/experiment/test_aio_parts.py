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

"""The all-in-one runner's parts that need no cloud: the stock task's
user-data and console times, boot volumes, pool bounds, the log costs."""

import base64
import functools
import os
import subprocess
import sys
import types

import fixtures

from mlaccel.launcher import servers
from mlaccel.pool import members as pool_members
from mlaccel.pool import spec as pool_spec
from mlaccel.pool import store as pool_store
from mlaccel.tasks import clip
from mlaccel_lab.experiment import aiocosts
from mlaccel_lab.experiment import aiorunner
from mlaccel_lab.experiment import aiostate
from mlaccel_lab.experiment import arms
from mlaccel_lab.experiment import coldlaunch
from mlaccel_lab.experiment import workload as wl
from mlaccel_lab.testing.aio import configs
from mlaccel_lab.testing.aio import layout as aio_layout
from mlaccel_lab.testing.aio import procs
from mlaccel_lab.testing import cloudinit
from tests import fixtures as mlaccel_fixtures
from tests import testcase

IMAGE = '0f1e2d3c-4b5a-4968-8776-655443322110'
#: Prints the lines Cinder's image-volume cache logs for the actions named
#: (``hit``, ``miss``) of the image given, notifications on as the cloud's
#: cinder.conf has them.
CINDER_CACHE_LINES = """
import logging, sys, types
from oslo_config import cfg
from oslo_messaging import opts
from cinder import objects
objects.register_all()
from cinder.image import cache
for group, options in opts.list_opts():
    if group == 'oslo_messaging_notifications':
        cfg.CONF.register_opts(options, group)
cfg.CONF.set_override('driver', ['messagingv2'],
                      'oslo_messaging_notifications')
logging.basicConfig(stream=sys.stdout, level=logging.WARNING,
                    format='%(asctime)s DEBUG %(name)s [' + sys.argv[2]
                    + '] %(message)s', force=True)
logging.getLogger('cinder.image.cache').setLevel(logging.DEBUG)
image_cache = object.__new__(cache.ImageVolumeCache)
image_cache.notifier = types.SimpleNamespace(info=lambda *args: None)
for action in sys.argv[3:]:
    getattr(image_cache, '_notify_cache_' + action)(None, sys.argv[1],
                                                    'aio@file')
"""
VOLUME = '11111111-2222-4333-8444-555555555555'
#: oslo.log's context of a line: a user's request, Cinder's internal tenant.
REQUEST = 'req-1 req-2 %s %s - - default default' % ('a' * 32, 'b' * 32)
INTERNAL = 'None req-3 %s %s - - - -' % (configs.CINDER_INTERNAL_USER,
                                         configs.CINDER_INTERNAL_PROJECT)


class ColdTaskTest(testcase.TestCase):

    def test_user_data_starts_the_task_on_the_test_driver(self):
        root = self.useFixture(fixtures.TempDir()).path
        text = coldlaunch.user_data({'steps': 7, 'seed': 3,
                                     'device_ms': 2.5})
        guest = cloudinit.guest(base64.b64encode(text.encode()).decode(),
                                ['mlaccel-taskd', 'python -m mlaccel.'],
                                root)
        self.assertIsNotNone(guest)
        self.assertEqual(['-m', 'mlaccel.tasks.clip', '--device-ms', '2.5',
                          '--seed', '3', '--steps', '7', '--threads', '1',
                          '--print-times'], guest.argv[1:])

    def test_read_times_first_of_each_event(self):
        text = ('noise\n%s started 10.5\n%s first_step 12.25\n'
                '%s first_step 99\n%s finished nan-ish\n'
                '%s finished 20\n' % ((clip.TIMES_PREFIX,) * 5))
        self.assertEqual({'started': 10.5, 'first_step': 12.25,
                          'finished': 20.0}, clip.read_times(text))
        self.assertEqual({}, clip.read_times(None))


class BootVolumeTest(testcase.TestCase):

    def test_mapping(self):
        bdm, = servers.boot_volume(IMAGE, 2)
        self.assertEqual({'boot_index': 0, 'uuid': IMAGE,
                          'source_type': 'image',
                          'destination_type': 'volume', 'volume_size': 2,
                          'delete_on_termination': True}, bdm)

    def test_bad_size(self):
        for size in (0, -1, 1.5, True, None):
            self.assertRaises(ValueError, servers.boot_volume, IMAGE, size)

    def test_volume_gb_rounds_up(self):
        self.assertEqual(1, aiorunner.volume_gb(256 << 20))
        self.assertEqual(1, aiorunner.volume_gb(1 << 30))
        self.assertEqual(2, aiorunner.volume_gb((1 << 30) + 1))


class ArmPathTest(testcase.TestCase):

    def test_launcher_path(self):
        self.assertFalse(aiorunner.launcher_path(arms.STOCK))
        self.assertTrue(aiorunner.launcher_path(arms.MLACCEL))
        self.assertTrue(aiorunner.launcher_path(arms.only(arms.POOL)))
        self.assertFalse(aiorunner.launcher_path(arms.only(arms.MIRROR)))
        self.assertTrue(aiorunner.launcher_path(arms.without(arms.TASKD)))

    def test_pool_bounds_per_image_and_boot_kind(self):
        made = wl.Workload({}, 1, (wl.Image('a', 1), wl.Image('b', 1)), (
            wl.Task(0, 0.0, 'a', 2, wl.VOLUME, 5),
            wl.Task(1, 1.0, 'a', 3, wl.VOLUME, 5),
            wl.Task(2, 5.0, 'a', 6, wl.IMAGE, 5),
            wl.Task(3, 30.0, 'a', 4, wl.VOLUME, 5)))
        # The burst of the first two is the volume pool's peak within 10 s;
        # the image-backed task has a pool of its own.
        self.assertEqual((5, 9), made.pool_bounds('a', wl.VOLUME))
        self.assertEqual((4, 9), made.pool_bounds('a', wl.VOLUME, 0.5))
        self.assertEqual((6, 6), made.pool_bounds('a', wl.IMAGE))
        self.assertEqual((0, 0), made.pool_bounds('b', wl.IMAGE))
        self.assertEqual([('a', wl.IMAGE), ('a', wl.VOLUME)],
                         made.pool_keys())

    def test_boot_volume_holds_the_image(self):
        image = wl.Image('a', (1 << 30) + 1)
        self.assertEqual(2, aiorunner.boot_volume_gb(image, wl.VOLUME))
        self.assertIsNone(aiorunner.boot_volume_gb(image, wl.IMAGE))


class LogCostsTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        base = self.useFixture(fixtures.TempDir()).path
        self.lay = aio_layout.Layout(base, aio_layout.Settings(computes=2))
        os.makedirs(self.lay.log)

    def log(self, name, text):
        with open(procs.log_path(self.lay, name), 'a') as f:
            f.write(text)

    def test_only_lines_after_the_mark_count(self):
        self.log('nova-compute-aio1', 'INFO Fetched image %s (100 bytes) '
                 'into the image cache in 0.10 s\n' % IMAGE)
        mark = aiocosts.LogMark(self.lay)
        self.log('nova-compute-aio1', 'INFO Fetched image %s (300 bytes) '
                 'into the image cache in 0.10 s\n' % IMAGE)
        self.log('mlaccel-agent-aio2', 'INFO Pre-fetched image %s: 200 '
                 'bytes in 0.1 s\n' % IMAGE)
        self.log('cinder-volume', "INFO Volume %s from image %s takes "
                 "Cinder's normal path: full\n" % (VOLUME, IMAGE))
        self.assertEqual(sorted([('aio1', IMAGE, 300), ('aio2', IMAGE, 200)]),
                         sorted(mark.fetches()))
        self.assertEqual({('aio1', IMAGE)}, mark.fetched_by_compute())
        self.assertEqual({VOLUME}, mark.degraded_volumes())

    def test_cinder_s_copies_are_counted_from_its_own_lines(self):
        """Cinder's own code writes the lines, in a process of its own.

        (Cinder and Nova register options of the same names: they do not
        load into one process.) Its notifier is stubbed: the notification's
        transport is not what is read. The contexts are written as oslo.log
        writes them; which lookup logs in which context was read in a real
        cloud's log: a copy is a miss in the request's context, then two
        in the internal tenant's; a clone a hit in each.
        """
        def logged(context, *actions):
            out = subprocess.run(
                [sys.executable, '-c', CINDER_CACHE_LINES, IMAGE, context] +
                list(actions), check=True, capture_output=True, text=True)
            self.log('cinder-volume', out.stdout)

        logged(REQUEST, 'miss')
        mark = aiocosts.LogMark(self.lay)
        # Two copies, a clone.
        for _ in range(2):
            logged(REQUEST, 'miss')
            logged(INTERNAL, 'miss', 'miss')
        logged(REQUEST, 'hit')
        logged(INTERNAL, 'hit')
        self.assertEqual({IMAGE: 2}, mark.cinder_cache_misses())

    def test_cinder_s_copies_go_to_the_first_volumes_recorded(self):
        copies = aiocosts.CacheCopies()
        other = VOLUME
        # Two copies logged: the first two volumes recorded, then clones.
        self.assertEqual([True, True, False], [
            copies.copied(IMAGE, {IMAGE: 2}) for _ in range(3)])
        # A later miss (the entry evicted) copies once more.
        self.assertTrue(copies.copied(IMAGE, {IMAGE: 3}))
        self.assertFalse(copies.copied(IMAGE, {IMAGE: 3}))
        # Without a logged miss the run's first volume is still a copy.
        self.assertEqual([True, False], [
            copies.copied(other, {}) for _ in range(2)])

    def test_a_replaced_log_is_read_from_its_start(self):
        self.log('nova-compute-aio2', 'x' * 1000)
        mark = aiocosts.LogMark(self.lay)
        os.unlink(procs.log_path(self.lay, 'nova-compute-aio2'))
        self.log('nova-compute-aio2', 'Fetched image %s (5 bytes)\n' % IMAGE)
        self.assertEqual([('aio2', IMAGE, 5)], mark.fetches())


class MemberSecondsTest(testcase.TestCase):
    """Member VM-seconds of a real pool store.

    Nova's server list is a stand-in (no cloud here) listing what a
    manager in the middle of a build looks like.
    """

    def test_members_still_building_count_from_their_create_request(self):
        store = pool_store.PoolStore(self.useFixture(
            fixtures.TempDir()).path)
        spec = pool_spec.PoolSpec('p', IMAGE, 'f')
        with store.transaction(spec.key, create=pool_store.new_state(
                spec, 1, 1, 1)) as state:
            state['stats']['build_vm_s'] = 30.0
            state['members']['held'] = {
                'server_id': 'held', 'state': pool_store.IDLE,
                'ready_at': None, 'idle_since': None}
        group = self.useFixture(mlaccel_fixtures.Conf()).conf.mlaccel_pool
        created = '2026-12-05T07:00:00Z'
        servers = [types.SimpleNamespace(id='held', created_at=created),
                   types.SimpleNamespace(id='building', created_at=created)]
        asked = []

        class Compute:
            def servers(self, name):
                asked.append(name)
                return servers
        conn = types.SimpleNamespace(compute=Compute())
        self.useFixture(fixtures.MonkeyPatch(
            'time.time', lambda: 1796454000.0 + 42.0))  # 07:00:42 UTC
        without = aiostate.member_seconds(store, group)
        self.assertEqual(30.0, without)
        self.assertEqual(30.0 + 42.0,
                         aiostate.member_seconds(store, group, conn))
        self.assertEqual([pool_members.name_filter(spec.key)], asked)


class FailedDeleteCompute:
    """Nova's compute API as the reset meets it while the scheduler restarts.

    A stand-in for the all-in-one cloud's Nova (not run by unit tests):
    the first delete of each server fails, as nova-compute's does when it
    cannot reach the restarting scheduler, and leaves it in ERROR; a second
    delete goes through.
    """

    def __init__(self, names):
        self.servers_by_id = {name: types.SimpleNamespace(
            id=name, name=name, status='ACTIVE', task_state=None)
            for name in names}
        self.deletes = []

    def servers(self, all_projects, name):
        return [s for s in self.servers_by_id.values()
                if s.name.startswith(name.lstrip('^'))]

    def delete_server(self, server, ignore_missing):
        self.deletes.append(server.id)
        if self.deletes.count(server.id) == 1:
            server.status = 'ERROR'
        else:
            del self.servers_by_id[server.id]


class TestDeleteServers(testcase.TestCase):

    def test_a_server_a_failed_delete_left_in_error_is_deleted_again(self):
        compute = FailedDeleteCompute(['mlaccel_pool_a-1', 'other-1'])
        conn = types.SimpleNamespace(compute=compute)
        self.useFixture(fixtures.MonkeyPatch(
            'mlaccel_lab.experiment.aiostate.wait_for', functools.partial(
                aiostate.wait_for, timeout=5.0, interval=0.01)))
        self.assertEqual(1, aiostate.delete_servers(conn, ['^mlaccel_pool_']))
        self.assertEqual(['mlaccel_pool_a-1'] * 2, compute.deletes)
        self.assertEqual(['other-1'], list(compute.servers_by_id))
