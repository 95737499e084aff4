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

"""The CLIP-style example task: learns, is deterministic, runs under taskd.

Kept cheap: a few dozen steps of the small model on one thread.
"""

import json
import subprocess
import sys

import torch

from mlaccel import tasks
from mlaccel.tasks import clip
from mlaccel.tasks import clip_model
from tests import testcase
from tests.unit.taskd import base

TIMING = ('first_step_at', 'seconds')


def outcome(result):
    return {k: v for k, v in result.items() if k not in TIMING}


class TestClip(testcase.TestCase):

    def setUp(self):
        super().setUp()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)
        self.addCleanup(tasks.bind_reporter, None)

    def test_data_is_fixed_by_seed(self):
        first, second = clip_model.Pictures(8, 1), clip_model.Pictures(8, 1)
        for index in range(8):
            self.assertTrue(torch.equal(first[index][0], second[index][0]))
            self.assertTrue(torch.equal(first[index][1], second[index][1]))
        self.assertFalse(torch.equal(first[0][0],
                                     clip_model.Pictures(8, 2)[0][0]))

    def test_learns_and_reports_first_step(self):
        events = []
        tasks.bind_reporter(events.append)
        result = clip.main({'steps': 40, 'seed': 1})
        self.assertEqual(40, result['steps'])
        self.assertLess(result['final_loss'], result['first_loss'] / 2)
        self.assertGreater(result['accuracy'], 1 / 48)
        self.assertEqual([{'event': 'first_step',
                           'at': result['first_step_at']}], events)

    def test_same_seed_same_result(self):
        first = clip.main({'steps': 5, 'seed': 4})
        second = clip.main({'steps': 5, 'seed': 4})
        self.assertEqual(outcome(first), outcome(second))
        self.assertNotEqual(first['losses'],
                            clip.main({'steps': 5, 'seed': 5})['losses'])

    def test_unknown_argument_refused(self):
        self.assertRaises(ValueError, clip.main, {'stpes': 3})

    def test_device_wait_leaves_the_training_unchanged(self):
        plain = clip.main({'steps': 3, 'seed': 2})
        waited = clip.main({'steps': 3, 'seed': 2, 'device_ms': 1})
        self.assertEqual(outcome(plain), outcome(waited))

    def test_negative_device_wait_refused(self):
        for bad in (-1, 'nan'):
            exc = self.assertRaises(ValueError, clip.main,
                                    {'steps': 3, 'device_ms': bad})
            self.assertIn('device_ms', str(exc))


class TestClipCommandLine(testcase.TestCase):

    def test_cli_prints_its_times_in_order(self):
        out = subprocess.run(
            [sys.executable, '-m', 'mlaccel.tasks.clip', '--steps', '2',
             '--print-times'], capture_output=True, text=True, check=True,
            timeout=300).stdout
        times = clip.read_times(out)
        self.assertEqual({'started', 'first_step', 'finished'}, set(times))
        self.assertLessEqual(times['started'], times['first_step'])
        self.assertLessEqual(times['first_step'], times['finished'])


class TestClipUnderTaskd(testcase.TestCase):

    def test_cold_and_taskd_give_the_same_result(self):
        daemon = self.useFixture(base.Daemon(preload=clip.PRELOAD))
        cold = subprocess.run(
            [sys.executable, '-m', 'mlaccel.tasks.clip', '--steps', '12',
             '--seed', '3', '--threads', '1'], cwd=base.REPO,
            capture_output=True, text=True, timeout=300, check=True)
        cold = json.loads(cold.stdout.splitlines()[-1])
        with daemon.client() as conn:
            self.assertEqual(['torch', 'torch._dynamo', 'mlaccel.tasks.clip'],
                             conn.health()['preloaded'])
            for mode in ('fork', 'worker'):
                status = conn.wait(conn.submit(
                    'mlaccel.tasks.clip:main', {'steps': 12, 'seed': 3},
                    threads=1, mode=mode), timeout=300)
                self.assertEqual('succeeded', status['state'],
                                 status['error'])
                self.assertEqual(outcome(cold), outcome(status['result']))
                self.assertEqual(status['first_step_at'],
                                 status['result']['first_step_at'])


class TestPreloadList(testcase.TestCase):

    def test_reading_the_preload_list_does_not_import_torch(self):
        code = ('import sys; from mlaccel.tasks import clip; '
                'print(clip.PRELOAD[-1], "torch" in sys.modules)')
        out = subprocess.run([sys.executable, '-c', code], cwd=base.REPO,
                             capture_output=True, text=True, timeout=60,
                             check=True)
        self.assertEqual('mlaccel.tasks.clip:warm False', out.stdout.strip())
