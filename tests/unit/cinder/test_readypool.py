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

"""When the adaptive ready pool serves, from the costs it measured."""

import threading
import time
import types

from mlaccel.cinder import readypool
from tests import testcase

PRIOR = readypool.HANDOVER_PRIOR


class WorthItTest(testcase.TestCase):

    def pool(self, clone=None, handover=None, adaptive=True):
        pool = readypool.ReadyPool(mirror=None, size=2, window=600,
                                   adaptive=adaptive)
        pool.clone_seconds = clone
        pool.handover_seconds = handover
        return pool

    def test_nothing_measured_serves(self):
        self.assertTrue(self.pool().worth_it())

    def test_clone_cheaper_than_an_unmeasured_handover_stands_aside(self):
        # A copy-on-write clone: the first request after a pre-warm clones.
        self.assertFalse(self.pool(clone=PRIOR / 50).worth_it())
        self.assertEqual(0, self.pool(clone=PRIOR / 50).target('i', True))

    def test_clone_dearer_than_an_unmeasured_handover_serves(self):
        self.assertTrue(self.pool(clone=PRIOR * 40).worth_it())
        self.assertEqual(2, self.pool(clone=PRIOR * 40).target('i', True))

    def test_a_measured_handover_replaces_the_prior(self):
        # Cheaper than the prior: clones a little cheaper than the prior
        # are still worth replacing by a handover.
        self.assertTrue(self.pool(clone=PRIOR / 2,
                                  handover=PRIOR / 10).worth_it())
        self.assertFalse(self.pool(clone=PRIOR * 2,
                                   handover=PRIOR * 3).worth_it())

    def test_not_adaptive_always_serves(self):
        self.assertTrue(self.pool(clone=PRIOR / 50, handover=PRIOR,
                                  adaptive=False).worth_it())


class IdleTest(testcase.TestCase):
    """``idle`` with the real refill thread; the cache it asks is a stub."""

    def test_busy_while_a_refill_is_queued_or_under_way(self):
        entered, release = threading.Event(), threading.Event()

        def peek(image_id):
            entered.set()
            release.wait(30)
            return None     # the image is gone: nothing to refill

        mirror = types.SimpleNamespace(
            cache=types.SimpleNamespace(peek=peek))
        pool = readypool.ReadyPool(mirror, size=2, window=600)
        self.addCleanup(release.set)
        self.assertTrue(pool.idle())
        pool.want('image')
        self.assertTrue(entered.wait(30))
        self.assertFalse(pool.idle())
        release.set()
        deadline = time.monotonic() + 30
        while not pool.idle() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(pool.idle())
