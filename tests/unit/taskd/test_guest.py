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

"""cloud-init user-data for the guest, read back the way the guest does."""

import os

import fixtures
from oslo_config import cfg
import yaml

from mlaccel import conf as mlaccel_conf
from mlaccel.conf import taskd as taskd_conf
from mlaccel.taskd import guest
from mlaccel.tasks import clip
from mlaccel import tls

from tests import testcase

TOKEN = 'Zm9vYmFyYmF6cXV4cXV1eA'
IDENTITY = tls.new_identity('vm-0')
LAUNCHER_CERT = tls.new_identity('launcher').cert_pem


class TestUserData(testcase.TestCase):

    def _files(self, text):
        self.assertTrue(text.startswith('#cloud-config\n'))
        document = yaml.safe_load(text)
        return document, {f['path']: f for f in document['write_files']}

    def test_config_credentials_and_unit(self):
        text = guest.user_data(
            ready_url='https://10.0.0.5:7800/ready/abc',
            tcp_address='0.0.0.0:7707', token=TOKEN, grace_period=12,
            tls_identity=IDENTITY, ready_cert=LAUNCHER_CERT)
        document, files = self._files(text)
        contents = {guest.TOKEN_PATH: TOKEN + '\n',
                    guest.TLS_CERT_PATH: IDENTITY.cert_pem,
                    guest.TLS_KEY_PATH: IDENTITY.key_pem,
                    guest.READY_CA_PATH: LAUNCHER_CERT}
        # Every file the daemon reads: private to the daemon's user.
        for path in (guest.CONF_PATH,) + tuple(contents):
            self.assertEqual('0600', files[path]['permissions'], path)
            self.assertEqual('mlaccel:mlaccel', files[path]['owner'], path)
        for path, content in contents.items():
            self.assertEqual(content, files[path]['content'])
        self.assertIn(['systemctl', 'enable', '--now', guest.UNIT_NAME],
                      document['runcmd'])
        unit = files[guest.UNIT_PATH]['content']
        self.assertIn('ExecStart=%s --config-file %s'
                      % (guest.EXECUTABLE, guest.CONF_PATH), unit)
        self.assertIn('\nUser=mlaccel\n', unit)
        self.assertIn('\nNoNewPrivileges=yes\n', unit)
        self.assertIn('TimeoutStopSec=27', unit)
        # The daemon's own option parser reads the written file.
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        with open(path, 'w') as out:
            out.write(files[guest.CONF_PATH]['content'])
        conf = cfg.ConfigOpts()
        mlaccel_conf.register_group(conf, taskd_conf)
        conf(['--config-file', path])
        group = conf.mlaccel_taskd
        self.assertEqual('https://10.0.0.5:7800/ready/abc', group.ready_url)
        self.assertEqual('0.0.0.0:7707', group.tcp_address)
        self.assertEqual(guest.TOKEN_PATH, group.token_file)
        self.assertEqual(list(clip.PRELOAD), group.preload)
        self.assertEqual(12.0, group.grace_period)
        for name, value in (('tls_cert_file', guest.TLS_CERT_PATH),
                            ('tls_key_file', guest.TLS_KEY_PATH),
                            ('ready_cafile', guest.READY_CA_PATH)):
            if hasattr(group, name):  # options of the daemon's TLS
                self.assertEqual(value, getattr(group, name))
            else:
                self.assertIn('%s = %s' % (name, value),
                              files[guest.CONF_PATH]['content'])

    def test_unit_names_its_user(self):
        unit = guest.systemd_unit(user='taskd')
        self.assertIn('\nUser=taskd\nGroup=taskd\n', unit)
        self.assertNotIn('User=root', guest.systemd_unit())

    def test_unix_only_has_no_token_file(self):
        document, files = self._files(guest.user_data(preload=['json'],
                                                      install='mlaccel'))
        self.assertNotIn(guest.TOKEN_PATH, files)
        self.assertEqual(['python3', '-m', 'pip', 'install', 'mlaccel'],
                         document['runcmd'][0])
        # The daemon's user is made before write_files needs it.
        self.assertIn('useradd --system', document['bootcmd'][0][2])

    def test_unsafe_values_refused(self):
        for kwargs in [{'ready_url': 'file:///etc/passwd'},
                       {'ready_url': 'http://x/ready/a\n[DEFAULT]'},
                       {'tcp_address': '0.0.0.0:7707'},
                       {'tcp_address': 'nowhere', 'token': TOKEN},
                       {'token': 'short'},
                       {'token': TOKEN + '\nX'},
                       {'preload': ['torch,os']},
                       {'preload': ['json'], 'log_dir': '/x\n[y]'},
                       {'ready_url': 'https://x/ready/a'},
                       {'ready_url': 'https://x/ready/a',
                        'ready_cert': 'not a certificate'},
                       {'ready_cert': LAUNCHER_CERT + 'x: y\n'},
                       {'user': 'root; rm -rf /'}]:
            self.assertRaises(ValueError, guest.user_data, **kwargs)
