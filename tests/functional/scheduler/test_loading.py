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

"""The README's nova.conf lines load mlaccel into a real nova-scheduler."""

import os
import re
import sys
import textwrap

from nova.scheduler import host_manager
from nova import utils as nova_utils
import testtools

import mlaccel
from tests.functional.scheduler import base

ENV = 'OS_NOVA_DISABLE_EVENTLET_PATCHING'

MLACCEL_FILTERS = {'BuildSlotFilter'}
MLACCEL_WEIGHERS = {'LifecycleWeigher'}


def readme_snippets():
    """The ``ini`` code blocks of README.rst, as text."""
    path = os.path.join(os.path.dirname(os.path.dirname(mlaccel.__file__)),
                        'README.rst')
    with open(path) as f:
        text = f.read()
    blocks = re.findall(
        r'^\.\. code-block:: ini\n(?:[ \t]+:\w+:.*\n)*\n'
        r'((?:(?:[ \t]+.*)?\n)+)', text, re.MULTILINE)
    return [textwrap.dedent(block) for block in blocks]


class ConcurrencyModeTest(testtools.TestCase):
    """The run proves which of Nova's concurrency modes it tested."""

    def test_mode_follows_the_environment(self):
        threading_wanted = os.environ.get(ENV, '').lower() in (
            '1', 'true', 'yes')
        self.assertEqual(threading_wanted,
                         nova_utils.concurrency_mode_threading())
        if threading_wanted:
            # Nova forbids importing eventlet in this mode.
            self.assertNotIn('eventlet', sys.modules)
        else:
            from eventlet import patcher
            self.assertTrue(patcher.is_monkey_patched('thread'))
            self.assertTrue(patcher.is_monkey_patched('socket'))


class ReadmeSnippetTest(testtools.TestCase):

    def test_readme_gives_the_tested_nova_conf(self):
        wanted = base.parse_ini(base.NOVA_CONF)
        found = [base.parse_ini(s) for s in readme_snippets()
                 if '[filter_scheduler]' in s]
        self.assertEqual(
            [wanted], found,
            'README.rst must hold one "code-block:: ini" with the nova.conf '
            'lines the functional tests use:\n%s' % base.NOVA_CONF)


class HostManagerLoadingTest(base.NovaHarnessBase):
    """A real HostManager, built from the README's nova.conf."""

    nova_conf = base.NOVA_CONF
    hosts = base.HOSTS[:1]

    def _assert_loaded(self, manager):
        filters = [type(f).__name__ for f in manager.enabled_filters]
        self.assertEqual(self.flags_of('enabled_filters'), filters)
        weighers = {type(w).__name__ for w in manager.weighers}
        self.assertLessEqual(MLACCEL_WEIGHERS, weighers)
        # Nova's own weighers are kept beside ours.
        self.assertLessEqual({'RAMWeigher', 'CPUWeigher', 'DiskWeigher'},
                             weighers)
        for cls in list(manager.filter_cls_map.values()) + [
                type(w) for w in manager.weighers]:
            if cls.__name__ in MLACCEL_FILTERS | MLACCEL_WEIGHERS:
                self.assertTrue(cls.__module__.startswith('mlaccel.'))

    @staticmethod
    def flags_of(name):
        return [v for g, n, value in base.nova_conf_overrides(base.NOVA_CONF)
                if n == name for v in value.split(',')]

    def test_new_host_manager_loads_mlaccel(self):
        manager = host_manager.HostManager()
        self.assertLessEqual(MLACCEL_FILTERS, set(manager.filter_cls_map))
        self._assert_loaded(manager)

    def test_running_scheduler_loaded_mlaccel(self):
        self._assert_loaded(self.scheduler_service.manager.host_manager)
