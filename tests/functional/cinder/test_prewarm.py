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

"""The pre-warm task: named, Glance-marked and bus-hot images are golden
before their first request.

The state bus is not running here; the host reports the task reads are
real :class:`mlaccel.hostreport.HostReport` objects in a real
:class:`mlaccel.statebus.reader.Snapshot`, as the report cache gives them.
"""

import json
import socket
import subprocess
import sys
import time
import urllib.request

from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from cinder.common import config
from cinder.image import glance

from mlaccel.cinder import prewarm
from mlaccel import hostreport
from mlaccel.statebus import reader
from tests.functional.cinder import base
from tests.functional.cinder import keystone_standin

MIB = base.MIB
NAMED = '0c0c0c0c-0000-4000-8000-00000000000a'


def snapshot(caches, stale=()):
    """Host reports: ``{host: [image ids in its cache]}``.

    The reports of hosts in ``stale`` are an hour old.
    """
    now = time.time()
    return reader.Snapshot(
        {host: hostreport.HostReport(
            host=host, timestamp=now - (3600 if host in stale else 0),
            cached_images=frozenset(images))
         for host, images in caches.items()}, now, 60.0)


class PrewarmTaskTest(base.MirrorTestBase):
    # The test images' owner is the operator's project.
    CACHE_FLAGS = {'prewarm_images': [NAMED], 'bus_hot_min_hosts': 2,
                   'hot_image_owners': [base.fake.PROJECT_ID]}

    def setUp(self):
        super().setUp()
        self.named = self.images.add(base.image_bytes('named', 2 * MIB),
                                     image_id=NAMED)
        self.marked = self.images.add(base.image_bytes('marked', 2 * MIB),
                                      properties={'mlaccel_hot': 'true'})
        self.unmarked = self.images.add(base.image_bytes('off', 2 * MIB),
                                        properties={'mlaccel_hot': 'false'})
        self.tenants = self.images.add(base.image_bytes('tenant', 2 * MIB),
                                       properties={'mlaccel_hot': 'true'},
                                       owner=base.fake.PROJECT2_ID)
        self.bus_hot = self.images.add(base.image_bytes('bus', 2 * MIB))
        self.bus_cold = self.images.add(base.image_bytes('cold', 2 * MIB))
        # Hot: in two fresh reports. Cold: in one fresh and one stale.
        self.reports = snapshot({
            'c1': [self.bus_hot['id']],
            'c2': [self.bus_hot['id'], 'not-in-glance'],
            'c3': [self.bus_cold['id'], 'not-in-glance'],
            'stale': [self.bus_cold['id']]}, stale=['stale'])
        self.mirror.prewarmer.reports = lambda: self.reports

    def cached(self):
        return {e['image_id']: e['pinned']
                for e in self.mirror.cache.entries()}

    def test_pass_makes_named_marked_and_bus_hot_images_golden(self):
        self.assertEqual(3, self.mirror.prewarmer.run_once())
        self.assertEqual({self.named['id']: True, self.marked['id']: True,
                          self.bus_hot['id']: False}, self.cached())
        for image in (self.named, self.marked, self.bus_hot):
            self.assertEqual(1, self.images.downloads[image['id']])
        for image in (self.unmarked, self.bus_cold, self.tenants):
            self.assertEqual(0, self.images.downloads[image['id']])
        self.assertIn('Image %s is marked hot but its owner %s is not in '
                      '[mlaccel_cinder] hot_image_owners'
                      % (self.tenants['id'], base.fake.PROJECT2_ID),
                      self.mlaccel_log.output)
        events = [(n['event_type'], n['payload'].get('source'))
                  for n in self.notifier.notifications
                  if n['event_type'] == 'mlaccel.mirror.prewarm']
        self.assertEqual(sorted([('mlaccel.mirror.prewarm', 'named'),
                                 ('mlaccel.mirror.prewarm', 'marked'),
                                 ('mlaccel.mirror.prewarm', 'bus')]),
                         sorted(events))
        # The first request for each is a clone.
        for image in (self.named, self.marked, self.bus_hot):
            volume = self.wait(self.create(image['id']))
            self.assertEqual('available', volume['status'])
            self.assertHoldsImage(volume['id'], image['id'])
            self.assertEqual(1, self.images.downloads[image['id']])
        self.assertEqual(3, self.mirror.stats['hit'])
        # A second pass has nothing left to do.
        self.assertEqual(0, self.mirror.prewarmer.run_once())
        self.assertEqual(2, self.mirror.prewarmer.passes)

    def test_failing_image_does_not_stop_the_pass(self):
        self.images.fail_after[self.named['id']] = MIB
        self.assertEqual(2, self.mirror.prewarmer.run_once())
        self.assertEqual({self.marked['id']: True,
                          self.bus_hot['id']: False}, self.cached())
        self.assertEqual(2, len(self.golden_rows()))
        self.assertIn('Pre-warm of image %s (named) failed'
                      % self.named['id'], self.mlaccel_log.output)


class PrewarmLimitsTest(base.MirrorTestBase):
    CACHE_FLAGS = {'max_cache_count': 1, 'bus_hot_min_hosts': 1}

    def test_bus_hot_image_never_evicts(self):
        used = self.images.add(base.image_bytes('used', 2 * MIB))
        hot = self.images.add(base.image_bytes('hot', 2 * MIB))
        self.wait(self.create(used['id']))
        self.mirror.prewarmer.reports = lambda: snapshot({'c1': [hot['id']]})
        self.assertEqual(0, self.mirror.prewarmer.run_once())
        self.assertEqual([used['id']],
                         [e['image_id'] for e in self.mirror.cache.entries()])
        self.assertEqual(0, self.images.downloads[hot['id']])


class GlanceCredentialsTest(base.MirrorTestBase):
    """Cinder's [glance] user logs in once, not once per pre-warm pass.

    Keystone is a stand-in here (:mod:`.keystone_standin`): an HTTP server
    in a process of its own that answers the token API and counts the
    logins, each of which costs a real Keystone a password hash.
    """

    def setUp(self):
        super().setUp()
        proc = subprocess.Popen(
            # The file itself: its package's set-up is not the stand-in's.
            [sys.executable, keystone_standin.__file__],
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.keystone = 'http://127.0.0.1:%d' % int(proc.stdout.readline())
        # Cinder's own [glance] options, with a user's credentials, in
        # options of the test's own.
        self.conf = cfg.ConfigOpts()
        self.conf.register_opts(glance.image_opts)
        self.conf.register_opts(config.image_opts)
        for opts in (glance.glance_opts, glance.glance_session_opts,
                     glance.glance_auth_opts):
            self.conf.register_opts(opts, group=glance.GLANCE_GROUP)
        self.conf([], default_config_files=[])
        self.conf.set_override('auth_type', 'v3password', group='glance')
        self.conf.register_opts(
            ks_loading.get_auth_plugin_conf_options('v3password'),
            group='glance')
        for name, value in (
                ('auth_url', self.keystone + '/v3'), ('username', 'cinder'),
                ('password', 'secret'), ('user_domain_id', 'default'),
                ('project_name', 'service'),
                ('project_domain_id', 'default')):
            self.conf.set_override(name, value, group='glance')

    def logins(self):
        with urllib.request.urlopen(self.keystone + '/logins') as reply:
            return json.load(reply)['logins']

    def test_one_login_for_every_pass(self):
        contexts = prewarm.GlanceContext(self.conf)
        first, second = contexts(), contexts()
        self.assertEqual(1, self.logins())
        self.assertIs(first.user_auth_plugin, second.user_auth_plugin)
        self.assertEqual(
            [{'type': 'image', 'endpoints': [
                {'publicURL': keystone_standin.GLANCE}]}],
            second.service_catalog)
        self.assertEqual(base.INTERNAL_PROJECT, second.project_id)

    def test_a_failed_lookup_is_tried_again(self):
        closed = socket.socket()
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
        closed.close()
        live = self.conf.glance.auth_url
        self.conf.set_override('auth_url', 'http://127.0.0.1:%d/v3' % port,
                               group='glance')
        contexts = prewarm.GlanceContext(self.conf)
        self.assertRaises(ks_exceptions.ConnectFailure, contexts)
        self.conf.set_override('auth_url', live, group='glance')
        self.assertEqual(base.INTERNAL_PROJECT, contexts().project_id)
        self.assertEqual(1, self.logins())
