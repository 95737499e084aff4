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

"""``mlaccel launch`` runs the example task end to end on two VMs."""

import importlib.util

from tempest import config
from tempest.lib import decorators

from mlaccel.launcher import api
from mlaccel.tempest.tests import base
from mlaccel.tempest.tests.scenario import test_guest_process

CONF = config.CONF

STAGES = ('scheduling', 'creation', 'buffering', 'running')


class LaunchTest(base.MlaccelAdminTest):
    """The launcher, taskd in each VM, and the life-cycle record.

    Each VM gets a token and a TLS identity of its own in its user-data.
    Its task daemon pushes its readiness, signed with that token, over
    HTTPS pinned to the certificate of the launcher's listener on this
    host; the launcher then talks to it over TLS pinned to the VM's own
    certificate. The guests must run on this host (the all-in-one cloud
    with the test virt driver).
    """

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.mlaccel.same_host_as_computes:
            raise cls.skipException('the guests cannot reach this host')
        if importlib.util.find_spec('torch') is None:
            raise cls.skipException('the example task needs torch')

    @decorators.idempotent_id('e1f6d2b0-3c4a-4f5e-8a9b-0c1d2e3f4a01')
    def test_launch_example_task_on_two_vms(self):
        result = api.launch(
            self.connect(), CONF.compute.image_ref, CONF.compute.flavor_ref,
            2, 'clip', {'steps': 20, 'seed': 1},
            network='none', timeout=CONF.compute.build_timeout * 3,
            listen_host='127.0.0.1', callback_host='127.0.0.1',
            taskd_port=0, submit_options={'threads': 1, 'seed': 1})
        self.assertEqual(api.SUCCEEDED, result['outcome'], result['error'])
        self.assertEqual(2, len(result['vms']))
        self.assertEqual({}, {k: v for k, v in result['cleanup'].items()
                              if k == 'leaked' and v})
        losses = []
        for vm in result['vms']:
            self.assertEqual('succeeded', vm['state'])
            self.assertTrue(vm['address'].startswith('tcp:127.0.0.1:'),
                            vm['address'])
            durations = vm['timeline']['durations']
            for stage in STAGES:
                self.assertIsNotNone(durations.get(stage), stage)
                self.assertGreaterEqual(durations[stage], 0.0, stage)
            losses.append(vm['result']['final_loss'])
            self.assertEqual([], test_guest_process.guest_pids(
                vm['server_id']))
        # Same seed, same task: the same result on both VMs.
        self.assertEqual(losses[0], losses[1])
        for stage in STAGES:
            self.assertIsNotNone(
                result['timeline']['durations'].get(stage), stage)
