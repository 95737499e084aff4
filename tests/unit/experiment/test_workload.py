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

"""The workload: its shipped shape, the seeded generator, bad files."""

import os
import tempfile

import yaml

from mlaccel_lab.experiment import schema
from mlaccel_lab.experiment import workload
from tests import testcase
from tests.unit.experiment import synthetic


class TestDefaultWorkload(testcase.TestCase):

    def test_shipped_workload_is_a_stream_from_the_trace(self):
        made = workload.load()
        sizes = sorted(image.size for image in made.images)
        self.assertGreaterEqual(len(sizes), 3)
        self.assertEqual(256 * workload.MIB, sizes[0])
        self.assertEqual(2048 * workload.MIB, sizes[-1])
        stream = made.shape['stream']
        self.assertEqual(stream['tasks'], len(made.tasks))
        self.assertTrue(all(1 <= task.vms <= stream['max_vms']
                            for task in made.tasks))
        # Every task carries its lifetime from the trace, arrivals sorted
        # and from 0, and the running-share knob is gone.
        self.assertTrue(all(task.lifetime is not None and task.lifetime >= 0
                            for task in made.tasks))
        times = [task.at for task in made.tasks]
        self.assertEqual(sorted(times), times)
        self.assertEqual(0.0, times[0])
        self.assertNotIn('min_running_share', made.task_spec)
        # The boot kinds in the stated share, whatever the seed.
        for seed in (1, 2, 42):
            boots = [t.boot for t in workload.load(seed=seed).tasks]
            self.assertEqual(round(stream['boot_from_volume'] * len(boots)),
                             boots.count(workload.VOLUME))
        self.assertEqual('clip', made.task_spec['entry'])

    def test_stream_arrivals_are_the_traces_scaled(self):
        shape = workload.load_shape()
        slow = workload.generate(shape, seed=3)
        shape['stream'] = dict(shape['stream'],
                               time_scale=2 * shape['stream']['time_scale'])
        fast = workload.generate(shape, seed=3)
        self.assertEqual([t.image for t in slow.tasks],
                         [t.image for t in fast.tasks])
        for a, b in zip(slow.tasks, fast.tasks):
            self.assertAlmostEqual(2 * a.at, b.at, delta=0.002)

    def test_stream_images_follow_zipf_popularity(self):
        shape = workload.load_shape()
        shape['stream'] = dict(shape['stream'], tasks=400)
        made = workload.generate(shape, seed=1)
        counts = [sum(t.image == i.name for t in made.tasks)
                  for i in made.images]
        # Zipf with exponent 1 over three images: 55 %, 27 %, 18 %.
        self.assertGreater(counts[0], counts[1])
        self.assertGreater(counts[1], counts[2] * 0.8)
        self.assertAlmostEqual(0.545, counts[0] / 400.0, delta=0.08)

    def test_stream_replays_a_trace_file(self):
        rows = [{'creation_time': str(1000 + 60 * i),
                 'deletion_time': str(1000 + 60 * i + 100 + i),
                 'num_gpu': str(i % 3), 'memory_mib': '8192'}
                for i in range(20)]
        made = workload.generate(workload.load_shape(), seed=5,
                                 trace_rows=rows)
        pairs = zip(made.tasks, made.tasks[1:])
        gaps = {round(b.at - a.at, 3) for a, b in pairs}
        scale = made.shape['stream']['time_scale']
        self.assertEqual({round(60 * scale, 3)}, gaps)
        self.assertTrue(all(100 <= t.lifetime < 120 for t in made.tasks))

    def test_a_shape_has_a_stream_or_a_fixed_mix_not_both(self):
        shape = dict(workload.load_shape(),
                     tasks=synthetic.fixed_shape()['tasks'])
        error = self.assertRaises(schema.InvalidFile, workload.check_shape,
                                  shape, 'both.yaml')
        self.assertIn('either a stream, or tasks and arrivals',
                      str(error))

    def test_burst_tasks_arrive_within_their_spread(self):
        shape = synthetic.fixed_shape()
        burst = shape['arrivals']['bursts'][0]
        times = [task.at for task in workload.generate(shape).tasks]
        windows = [times[i + burst['size'] - 1] - times[i]
                   for i in range(len(times) - burst['size'] + 1)]
        self.assertLessEqual(min(windows), burst['spread'])
        self.assertLessEqual(max(times), shape['arrivals']['duration'])
        self.assertEqual(sorted(times), times)

    def test_same_seed_same_tasks_other_seed_same_shape(self):
        shape = synthetic.fixed_shape()
        first = workload.generate(shape)
        self.assertEqual(first.tasks, workload.generate(shape).tasks)
        self.assertEqual(shape['seed'], first.seed)
        other = workload.generate(shape, seed=shape['seed'] + 1)
        self.assertNotEqual(first.tasks, other.tasks)
        self.assertEqual(len(first.tasks), len(other.tasks))
        self.assertEqual(first.images, other.images)
        vms = shape['tasks']['vms']
        self.assertTrue(all(vms['min'] <= t.vms <= vms['max']
                            for t in other.tasks))

    def test_boot_from_volume_share_follows_the_shape(self):
        shape = synthetic.fixed_shape()
        shape['tasks'] = dict(shape['tasks'], count=2000,
                              boot_from_volume=0.25)
        made = workload.generate(shape, seed=3)
        share = sum(t.boot == workload.VOLUME
                    for t in made.tasks) / len(made.tasks)
        self.assertAlmostEqual(0.25, share, delta=0.04)

    def test_seeds_of_a_shape_share_its_mix(self):
        shape = synthetic.fixed_shape()
        shape['tasks'] = dict(shape['tasks'], count=7,
                              boot_from_volume=0.3)

        def mix(made):
            return (sorted(t.image for t in made.tasks),
                    sorted(t.boot for t in made.tasks),
                    sorted(t.vms for t in made.tasks))
        first = workload.generate(shape, seed=1)
        self.assertEqual(mix(first), mix(workload.generate(shape, seed=2)))
        images, boots, vms = mix(first)
        self.assertEqual(2, boots.count(workload.VOLUME))
        self.assertEqual([1, 1, 2, 3, 3, 4, 4], vms)
        # Equal weights: the seven tasks spread 3, 2, 2 over the images.
        counts = sorted(images.count(i.name) for i in first.images)
        self.assertEqual([2, 2, 3], counts)

    def test_image_weights_set_the_share_of_tasks(self):
        shape = synthetic.fixed_shape()
        shape['tasks'] = dict(shape['tasks'], count=10)
        weights = [1, 3, 6]
        shape['images'] = [dict(i, weight=w)
                           for i, w in zip(shape['images'], weights)]
        made = workload.generate(shape, seed=5)
        self.assertEqual(weights, [sum(t.image == i['name']
                                       for t in made.tasks)
                                   for i in shape['images']])

    def test_device_wait_reaches_the_task_arguments(self):
        shape = synthetic.fixed_shape()
        shape['task'] = dict(shape['task'], device_ms=12.5)
        task = workload.generate(shape).tasks[1]
        self.assertEqual({'steps': shape['task']['steps'], 'seed': 1,
                          'device_ms': 12.5}, task.args())
        shape['task'].pop('device_ms')
        self.assertNotIn('device_ms', workload.generate(
            shape).tasks[1].args())

    def test_warmup_takes_each_boot_kind_once_short_and_at_once(self):
        made = synthetic.fixed_workload()
        short = made.warmup(steps=5)
        self.assertEqual([workload.IMAGE, workload.VOLUME],
                         sorted(t.boot for t in short.tasks))
        firsts = [next(t for t in made.tasks if t.boot == boot)
                  for boot in (workload.IMAGE, workload.VOLUME)]
        self.assertEqual(sorted(t.index for t in firsts),
                         [t.index for t in short.tasks])
        self.assertTrue(all(t.at == 0 and t.steps == 5
                            for t in short.tasks))
        self.assertEqual(made.images, short.images)

    def test_round_trip_through_a_dict(self):
        made = synthetic.fixed_workload(seed=4)
        self.assertEqual(made, workload.Workload.from_dict(made.to_dict()))


class TestBadWorkloadFiles(testcase.TestCase):

    def _write(self, text):
        fd, path = tempfile.mkstemp(suffix='.yaml')
        with os.fdopen(fd, 'w') as stream:
            stream.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def _shape(self, **changes):
        shape = synthetic.fixed_shape()
        shape.update(changes)
        return self._write(yaml.safe_dump(shape))

    def _error(self, path):
        error = self.assertRaises(schema.InvalidFile, workload.load, path)
        message = str(error)
        self.assertNotIn('\n', message)
        self.assertIn(os.path.basename(path), message)
        return message

    def test_unknown_key_names_where(self):
        shape = synthetic.fixed_shape()
        shape['task']['stpes'] = 3
        message = self._error(self._write(yaml.safe_dump(shape)))
        self.assertIn('task', message)
        self.assertIn('stpes', message)

    def test_wrong_type_names_the_field(self):
        shape = synthetic.fixed_shape()
        shape['images'][1]['size_mib'] = 'big'
        message = self._error(self._write(yaml.safe_dump(shape)))
        self.assertIn('images/1/size_mib', message)

    def test_min_above_max(self):
        message = self._error(self._shape(tasks={
            'count': 3, 'vms': {'min': 4, 'max': 2}}))
        self.assertIn('min 4 is above max 2', message)

    def test_more_burst_tasks_than_tasks(self):
        message = self._error(self._shape(
            tasks={'count': 1, 'vms': {'min': 1, 'max': 1}}))
        self.assertIn('bursts', message)

    def test_duplicate_image_names(self):
        message = self._error(self._shape(images=[
            {'name': 'a', 'size_mib': 1}, {'name': 'a', 'size_mib': 2}]))
        self.assertIn('unique', message)

    def test_not_yaml_and_missing_file(self):
        message = self._error(self._write('images: [unclosed\n'))
        self.assertIn('not YAML or JSON', message)
        missing = os.path.join(tempfile.gettempdir(), 'no-such-workload.y')
        error = self.assertRaises(schema.InvalidFile, workload.load,
                                  missing)
        self.assertIn('cannot read', str(error))
