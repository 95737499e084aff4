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

"""A compute node on disk for the agent's tests: nova.conf, instances_path."""

import hashlib
import os
import time

import fixtures

from mlaccel.agent import cachefile
from mlaccel.agent import novaconf

from tests import testcase


def image(image_id, data, **fields):
    """ImageMeta of ``data`` with Glance's sha512 hash (overridable)."""
    fields.setdefault('size', len(data))
    fields.setdefault('hash_algo', 'sha512')
    fields.setdefault('hash_value', hashlib.sha512(data).hexdigest())
    return cachefile.ImageMeta(id=image_id, **fields)


def wait_for(predicate, timeout=60):
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def chunks(data, size=4096):
    return lambda: (data[i:i + size] for i in range(0, len(data), size))


class NodeTestCase(testcase.TestCase):
    """A real nova.conf and instances_path in a temporary directory."""

    HOST = 'cmp1'
    NOVA_CONF = ''

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.nova_conf = os.path.join(self.root, 'nova.conf')
        with open(self.nova_conf, 'w') as f:
            f.write('[DEFAULT]\nstate_path = %s\nhost = %s\n%s'
                    % (self.root, self.HOST, self.NOVA_CONF))
        self.settings = novaconf.load([self.nova_conf])
        self.log = self.useFixture(fixtures.FakeLogger(name='mlaccel'))

    def cache_files(self):
        try:
            return sorted(os.listdir(self.settings.cache_dir))
        except FileNotFoundError:
            return []
