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

import configparser
import os
import pwd
import shutil
import subprocess
import sys

import fixtures
from oslo_config import cfg
import yaml

from mlaccel import conf as mlaccel_conf
from mlaccel.conf import taskd as taskd_conf
from mlaccel.taskd import guest
from mlaccel.tasks import clip
from mlaccel import tls

from tests import testcase
from tests.unit.taskd import base

TOKEN = 'Zm9vYmFyYmF6cXV4cXV1eA'
IDENTITY = tls.new_identity('vm-0')
LAUNCHER_CERT = tls.new_identity('launcher').cert_pem
#: From linux/capability.h.
CAP_NUMBERS = {'CAP_CHOWN': 0, 'CAP_DAC_OVERRIDE': 1,
               'CAP_DAC_READ_SEARCH': 2, 'CAP_FOWNER': 3, 'CAP_KILL': 5,
               'CAP_SETGID': 6, 'CAP_SETUID': 7, 'CAP_NET_BIND_SERVICE': 10}


class TestUserData(testcase.TestCase):

    def _files(self, text):
        self.assertTrue(text.startswith('#cloud-config\n'))
        document = yaml.safe_load(text)
        return document, {f['path']: f for f in document['write_files']}

    def test_config_credentials_and_unit(self):
        text = guest.user_data(
            ready_url='https://10.0.0.5:7800/ready/abc',
            tcp_address='0.0.0.0:7707', token=TOKEN, grace_period=12,
            tls_identity=IDENTITY, ready_cert=LAUNCHER_CERT,
            preload=clip.PRELOAD)
        document, files = self._files(text)
        contents = {guest.TOKEN_PATH: TOKEN + '\n',
                    guest.TLS_CERT_PATH: IDENTITY.cert_pem,
                    guest.TLS_KEY_PATH: IDENTITY.key_pem,
                    guest.READY_CA_PATH: LAUNCHER_CERT}
        # Every file the daemon reads: root's, out of the tasks' reach.
        for path in (guest.CONF_PATH,) + tuple(contents):
            self.assertEqual('0600', files[path]['permissions'], path)
            self.assertEqual('root:root', files[path]['owner'], path)
        for path, content in contents.items():
            self.assertEqual(content, files[path]['content'])
        self.assertIn(['systemctl', 'enable', '--now', guest.UNIT_NAME],
                      document['runcmd'])
        unit = files[guest.UNIT_PATH]['content']
        self.assertIn('ExecStart=%s --config-file %s'
                      % (guest.EXECUTABLE, guest.CONF_PATH), unit)
        self.assertIn('\nUser=root\n', unit)
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

    def test_unit_names_the_task_user(self):
        unit = guest.systemd_unit(task_user='taskd')
        self.assertIn(' OS_MLACCEL_TASKD__TASK_USER=taskd\n', unit)
        self.assertRaises(ValueError, guest.systemd_unit,
                          task_user='x\nUser=nobody')

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
                       {'preload': ['json'], 'log_dir': '/x\n[y]'},
                       {'ready_url': 'https://x/ready/a'},
                       {'ready_url': 'https://x/ready/a',
                        'ready_cert': 'not a certificate'},
                       {'ready_cert': LAUNCHER_CERT + 'x: y\n'},
                       {'task_user': 'root; rm -rf /'}]:
            self.assertRaises(ValueError, guest.user_data, **kwargs)


class TestTasksRunApart(testcase.TestCase):
    """The guest runs tasks as a user of their own, not the daemon's.

    Before, the unit ran the daemon, and so every task, as ``mlaccel``:
    a task could kill the daemon or plant a ``.pth`` file in its user site
    directory, and the restarted daemon would serve the next holder of a
    pooled VM with the task's code in it.
    """

    def unit(self):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.read_string(guest.systemd_unit())
        return parser['Service']

    def environment(self):
        return dict(word.split('=', 1) for word in
                    self.unit()['Environment'].split())

    def test_unit_runs_the_daemon_isolated_tasks_as_the_task_user(self):
        service = self.unit()
        self.assertEqual('root', service['User'])
        self.assertNotIn('Group', service)
        env = self.environment()
        self.assertEqual('1', env['PYTHONNOUSERSITE'])
        self.assertEqual(guest.TASK_USER,
                         env['OS_MLACCEL_TASKD__TASK_USER'])
        self.assertEqual(set(guest.CAPABILITIES),
                         set(service['CapabilityBoundingSet'].split()))
        self.assertEqual('yes', service['NoNewPrivileges'])

    def test_user_data_makes_the_task_user_before_the_daemon_starts(self):
        document = yaml.safe_load(guest.user_data(preload=['json']))
        command = document['bootcmd'][0]
        self.assertEqual(guest.task_user_command(), command)
        self.assertEqual(['sh', '-c'], command[:2])
        self.assertIn('useradd --system --user-group --create-home '
                      '--home-dir /var/lib/mlaccel-task --shell '
                      '/usr/sbin/nologin mlaccel-task', command[2])
        self.assertIn('/etc/cron.deny /etc/at.deny', command[2])
        for spec in document['write_files']:
            self.assertEqual('root:root', spec['owner'], spec['path'])
        self.assertRaises(ValueError, guest.user_data,
                          task_user='a; reboot')

    def test_the_daemon_takes_its_task_user_from_the_unit(self):
        # The unit's environment reaches the real daemon's options: here
        # the image's task user does not exist, and the daemon refuses to
        # run tasks as itself instead.
        conf = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        with open(conf, 'w') as out:
            out.write(guest.config_text(preload=['json']))
        proc = subprocess.run(
            [sys.executable, '-m', 'mlaccel.cmd.taskd', '--config-file', conf],
            env=dict(os.environ, **self.environment()), cwd=base.REPO,
            capture_output=True, text=True, timeout=60)
        self.assertEqual(2, proc.returncode, proc.stderr)
        self.assertIn('task_user mlaccel-task does not exist', proc.stderr)

    def test_capabilities_of_the_unit_are_enough(self):
        # The daemon as root with only the unit's capabilities (setpriv
        # sets them as systemd's CapabilityBoundingSet does): tasks, in
        # both modes, run as the task user, can be cancelled and their logs
        # read.
        if os.geteuid() != 0:
            self.skipTest('needs root to drop tasks to another user')
        setpriv = shutil.which('setpriv')
        if setpriv is None:
            self.skipTest('setpriv (util-linux) is not installed')
        caps = ','.join('+' + cap[4:].lower() for cap in guest.CAPABILITIES)
        daemon = self.useFixture(base.Daemon(
            wait_ready=False, task_user='nobody', workers=1,
            launcher=[setpriv, '--bounding-set', '-all,' + caps]))
        daemon.wait_until_ready()
        nobody = pwd.getpwnam('nobody').pw_uid
        with daemon.client() as conn:
            for mode in ('fork', 'worker'):
                status = conn.wait(conn.submit(
                    base.SAMPLE + 'identity', mode=mode), 60)
                self.assertEqual('succeeded', status['state'],
                                 status['error'])
                self.assertEqual(nobody, status['result']['uid'])
                self.assertEqual('written as uid %d\n' % nobody,
                                 conn.logs(status['id']))
            task = conn.submit(base.SAMPLE + 'ignore_term')
            base.wait_for(lambda: conn.status(task)['state'] == 'running')
            conn.cancel(task)
            self.assertEqual('cancelled', conn.wait(task, 60)['state'])
        with open('/proc/%d/status' % daemon.process.pid) as status:
            bounding = [int(line.split()[1], 16) for line in status
                        if line.startswith('CapBnd:')]
        self.assertEqual([sum(1 << CAP_NUMBERS[cap]
                              for cap in guest.CAPABILITIES)], bounding)


class TestElement(testcase.TestCase):
    """The diskimage-builder element installs the same layout."""

    def test_install_script(self):
        path = os.path.join(base.REPO, 'elements', 'mlaccel-taskd',
                            'install.d', '60-mlaccel-taskd')
        with open(path) as script:
            text = script.read()
        # The daemon's code is root's, read-only to the task user, and run
        # with python -I.
        self.assertIn('chown -R root:root "$VENV"', text)
        self.assertIn('chmod -R go-w "$VENV"', text)
        self.assertIn('exec %s -I -m mlaccel.cmd.taskd "$@"', text)
        self.assertNotIn('ln -sf', text)
        self.assertIn('mlaccel.taskd.guest task-user', text)
        self.assertIn('mlaccel.taskd.guest unit', text)
        self.assertIn('--task-user "$TASK_USER"', text)
        self.assertNotIn('useradd', text)

    def test_guest_commands_the_element_runs(self):
        out = subprocess.run(
            [sys.executable, '-m', 'mlaccel.taskd.guest', 'task-user'],
            cwd=base.REPO, capture_output=True, text=True, check=True)
        self.assertEqual(guest.task_user_command()[2] + '\n', out.stdout)
        out = subprocess.run(
            [sys.executable, '-m', 'mlaccel.taskd.guest', 'unit',
             '--task-user', 'tasks'], cwd=base.REPO, capture_output=True,
            text=True, check=True)
        self.assertEqual(guest.systemd_unit(task_user='tasks'), out.stdout)
