"""cloud-init user-data for the guest, read back the way the guest does."""

import os

import fixtures
from oslo_config import cfg
import testtools
import yaml

from mlaccel import conf as mlaccel_conf
from mlaccel.conf import taskd as taskd_conf
from mlaccel.taskd import guest

TOKEN = 'Zm9vYmFyYmF6cXV4cXV1eA'


class TestUserData(testtools.TestCase):

    def _files(self, text):
        self.assertTrue(text.startswith('#cloud-config\n'))
        document = yaml.safe_load(text)
        return document, {f['path']: f for f in document['write_files']}

    def test_config_token_and_unit(self):
        text = guest.user_data(
            ready_url='http://10.0.0.5:7800/ready/abc',
            tcp_address='0.0.0.0:7707', token=TOKEN, grace_period=12)
        document, files = self._files(text)
        self.assertEqual('0600', files[guest.TOKEN_PATH]['permissions'])
        self.assertEqual(TOKEN + '\n', files[guest.TOKEN_PATH]['content'])
        self.assertIn(['systemctl', 'enable', '--now', guest.UNIT_NAME],
                      document['runcmd'])
        unit = files[guest.UNIT_PATH]['content']
        self.assertIn('ExecStart=%s --config-file %s'
                      % (guest.EXECUTABLE, guest.CONF_PATH), unit)
        self.assertIn('TimeoutStopSec=27', unit)
        # The daemon's own option parser reads the written file.
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        with open(path, 'w') as out:
            out.write(files[guest.CONF_PATH]['content'])
        conf = cfg.ConfigOpts()
        mlaccel_conf.register_group(conf, taskd_conf)
        conf(['--config-file', path])
        group = conf.mlaccel_taskd
        self.assertEqual('http://10.0.0.5:7800/ready/abc', group.ready_url)
        self.assertEqual('0.0.0.0:7707', group.tcp_address)
        self.assertEqual(guest.TOKEN_PATH, group.token_file)
        self.assertEqual(list(guest.EXAMPLE_PRELOAD), group.preload)
        self.assertEqual(12.0, group.grace_period)

    def test_unix_only_has_no_token_file(self):
        document, files = self._files(guest.user_data(preload=['json'],
                                                      install='mlaccel'))
        self.assertNotIn(guest.TOKEN_PATH, files)
        self.assertEqual(['python3', '-m', 'pip', 'install', 'mlaccel'],
                         document['runcmd'][0])

    def test_unsafe_values_refused(self):
        for kwargs in [{'ready_url': 'file:///etc/passwd'},
                       {'ready_url': 'http://x/ready/a\n[DEFAULT]'},
                       {'tcp_address': '0.0.0.0:7707'},
                       {'tcp_address': 'nowhere', 'token': TOKEN},
                       {'token': 'short'},
                       {'token': TOKEN + '\nX'},
                       {'preload': ['torch,os']},
                       {'preload': ['json'], 'log_dir': '/x\n[y]'}]:
            self.assertRaises(ValueError, guest.user_data, **kwargs)
