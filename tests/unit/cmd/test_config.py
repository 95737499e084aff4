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

"""mlaccel-config: the nova.conf / cinder.conf edits that enable mlaccel."""

import grp
import io
import os
import stat
import subprocess
import sys

import fixtures
from oslo_config import cfg

from mlaccel.cmd import config
from mlaccel.statebus import keys

from tests import testcase

NOVA_CONF = """\
[DEFAULT]
# a comment that must survive
host = compute1

[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = site.filters.MyFilter
host_subset_size = 2
enabled_filters = ComputeFilter,
  MyFilter

[placement]
auth_type = password
"""


def load(path):
    """The options as Nova's services and mlaccel would read them."""
    from nova.conf import notifications
    from nova.conf import scheduler
    from oslo_messaging.notify import notifier

    from mlaccel.conf import statebus
    conf = cfg.ConfigOpts()
    conf.register_opts(scheduler.filter_scheduler_opts,
                       group='filter_scheduler')
    conf.register_opts(notifications.ALL_OPTS, group='notifications')
    conf.register_opts(notifier._notifier_opts,
                       group='oslo_messaging_notifications')
    conf.register_opts(statebus.OPTS, group=statebus.GROUP)
    conf(['--config-file', path], project='nova')
    return conf


class Base(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.nova = self.write('nova.conf', NOVA_CONF)
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.stdout))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', self.stderr))

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def read(self, path):
        with open(path) as f:
            return f.read()

    def key(self, name, text=None, mode=0o600):
        """A key file: a deployment secret unless ``text`` is given."""
        path = self.write(name, (text or keys.generate()) + '\n')
        os.chmod(path, mode)
        return path

    def read_bytes(self, path):
        with open(path, 'rb') as f:
            return f.read()

    def main(self, *argv):
        """The exit status of the command; argparse's exits included."""
        try:
            return config.main(list(argv))
        except SystemExit as exc:
            return exc.code

    def snapshot(self):
        """Every file under the test directory, with its content."""
        files = {}
        for root, dirs, names in os.walk(self.tmp):
            for name in names:
                path = os.path.join(root, name)
                files[path] = None if os.path.islink(path) else \
                    self.read_bytes(path)
        return files

    def assertRefused(self, *argv, says=''):
        """One line on stderr, status 2, nothing changed or created."""
        before = self.snapshot()
        self.assertEqual(2, self.main(*argv))
        err = self.stderr.getvalue()
        self.assertEqual(1, err.count('\n'), err)
        self.assertIn(says, err)
        self.assertEqual(before, self.snapshot())
        return err


class EnableDisableTest(Base):

    def test_enable_keeps_multistr_values_and_comments(self):
        self.assertEqual(0, self.main('enable', '--nova-conf', self.nova,
                                      '--statebus-url', 'redis://h:1'))
        conf = load(self.nova)
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          'site.filters.MyFilter', config.MLACCEL_FILTERS],
                         conf.filter_scheduler.available_filters)
        self.assertEqual(['ComputeFilter', 'MyFilter', 'BuildSlotFilter'],
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual(['nova.scheduler.weights.all_weighers',
                          config.MLACCEL_WEIGHERS],
                         conf.filter_scheduler.weight_classes)
        self.assertEqual('redis://h:1', conf.mlaccel_statebus.backend_url)
        self.assertEqual(2, conf.filter_scheduler.host_subset_size)
        text = self.read(self.nova)
        self.assertIn('# a comment that must survive', text)
        self.assertIn('[placement]\nauth_type = password', text)

    def test_enable_is_idempotent(self):
        self.main('enable', '--nova-conf', self.nova)
        once = self.read(self.nova)
        mtime = os.stat(self.nova).st_mtime_ns
        self.main('enable', '--nova-conf', self.nova)
        self.assertEqual(once, self.read(self.nova))
        self.assertEqual(mtime, os.stat(self.nova).st_mtime_ns)
        self.assertIn('nova.conf: unchanged', self.stdout.getvalue())

    def test_enabled_by_hand_left_as_written(self):
        path = self.write('hand.conf', """\
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = mlaccel.scheduler.filters.all_filters
enabled_filters = ComputeFilter,
  BuildSlotFilter
weight_classes = nova.scheduler.weights.all_weighers,
  mlaccel.scheduler.weights.all_weighers

[notifications]
notification_format = versioned

[oslo_messaging_notifications]
driver = messagingv2
""")
        before = self.read(path)
        self.main('enable', '--nova-conf', path)
        self.assertEqual(before, self.read(path))
        self.assertIn('hand.conf: unchanged', self.stdout.getvalue())

    def test_unset_options_start_from_nova_defaults(self):
        path = self.write('bare.conf', '[DEFAULT]\nhost = x\n')
        self.main('enable', '--nova-conf', path)
        conf = load(path)
        from nova.conf import scheduler
        default = [opt.default for opt in scheduler.filter_scheduler_opts
                   if opt.name == 'enabled_filters'][0]
        self.assertEqual(default + ['BuildSlotFilter'],
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          config.MLACCEL_FILTERS],
                         conf.filter_scheduler.available_filters)

    def test_disable_undoes_enable(self):
        self.main('enable', '--nova-conf', self.nova)
        self.main('disable', '--nova-conf', self.nova)
        conf = load(self.nova)
        self.assertNotIn(config.MLACCEL_FILTERS,
                         conf.filter_scheduler.available_filters)
        self.assertEqual(['ComputeFilter', 'MyFilter'],
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual(['nova.scheduler.weights.all_weighers'],
                         conf.filter_scheduler.weight_classes)
        self.assertEqual('unversioned',
                         conf.notifications.notification_format)
        self.assertEqual([], conf.oslo_messaging_notifications.driver)

    def test_cinder_gets_the_statebus(self):
        cinder = self.write('cinder.conf', '[DEFAULT]\nhost = c\n')
        self.main('enable', '--nova-conf', self.nova, '--cinder-conf',
                  cinder, '--statebus-url', 'file:///var/lib/bus')
        self.assertIn('[mlaccel_statebus]\nbackend_url = file:///var/lib/bus',
                      self.read(cinder))
        self.assertNotIn('notification', self.read(cinder))

    def test_key_files(self):
        files = {'deployment.key': self.key('deployment.key'),
                 'host.key': self.key('host.key', 'ab' * 32)}
        cinder = self.write('cinder.conf', '[DEFAULT]\nhost = c\n')
        self.assertEqual(0, self.main(
            'enable', '--nova-conf', self.nova, '--cinder-conf', cinder,
            '--statebus-deployment-key-file', files['deployment.key'],
            '--statebus-host-key-file', files['host.key']))
        for path in (self.nova, cinder):
            conf = cfg.ConfigOpts()
            conf.register_opts([cfg.StrOpt('deployment_key_file'),
                                cfg.StrOpt('host_key_file')],
                               group='mlaccel_statebus')
            conf(['--config-file', path])
            self.assertEqual(files['deployment.key'],
                             conf.mlaccel_statebus.deployment_key_file)
            self.assertEqual(files['host.key'],
                             conf.mlaccel_statebus.host_key_file)

    def test_file_mode_kept(self):
        os.chmod(self.nova, 0o640)
        self.main('enable', '--nova-conf', self.nova)
        self.assertEqual(0o640, os.stat(self.nova).st_mode & 0o777)
        self.assertEqual(['nova.conf'], os.listdir(self.tmp))


#: A nova.conf that disable turns back into the same text after enable.
PLAIN = """\
[DEFAULT]
host = compute1

[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
enabled_filters = ComputeFilter
weight_classes = nova.scheduler.weights.all_weighers
"""


class NotificationsTest(Base):
    """Versioned notifications on; unversioned ones kept where used."""

    def enable_disable(self, text, fmt, drivers):
        path = self.write('n.conf', text)
        self.assertEqual(0, self.main('enable', '--nova-conf', path))
        conf = load(path)
        self.assertEqual(fmt, conf.notifications.notification_format)
        self.assertEqual(drivers, conf.oslo_messaging_notifications.driver)
        enabled = self.read(path)
        self.main('enable', '--nova-conf', path)
        self.assertEqual(enabled, self.read(path))
        self.assertEqual(0, self.main('disable', '--nova-conf', path))
        self.main('enable', '--nova-conf', path)
        self.main('disable', '--nova-conf', path)
        self.assertEqual(text, self.read(path))
        return enabled

    def test_nothing_sent_before(self):
        text = self.enable_disable(PLAIN, 'versioned', ['messagingv2'])
        self.assertIn('# %s\ndriver = messagingv2' % config.ADDED_NOTE, text)
        self.assertIn('# %s\nnotification_format = versioned'
                      % config.SET_NOTE % 'unset', text)

    def test_noop_driver(self):
        self.enable_disable(
            PLAIN + '[oslo_messaging_notifications]\ndriver = noop\n',
            'versioned', ['noop', 'messagingv2'])

    def test_unversioned_in_use_stays(self):
        # devstack's own settings
        self.enable_disable(
            PLAIN + '[oslo_messaging_notifications]\n'
            'driver = messagingv2\n\n'
            '[notifications]\nnotification_format = unversioned\n',
            'both', ['messagingv2'])
        self.enable_disable(
            PLAIN + '[oslo_messaging_notifications]\ndriver = log\n',
            'both', ['log', 'messagingv2'])

    def test_deprecated_group(self):
        self.enable_disable(
            PLAIN.replace('host = compute1', 'host = compute1\n'
                          'notification_format = unversioned') +
            '[oslo_messaging_notifications]\ndriver = log\n',
            'both', ['log', 'messagingv2'])

    def test_versioned_already(self):
        text = (PLAIN + '[oslo_messaging_notifications]\n'
                'driver = messaging\n\n'
                '[notifications]\nnotification_format = versioned\n')
        path = self.write('n.conf', text)
        self.main('enable', '--nova-conf', path)
        self.main('disable', '--nova-conf', path)
        self.assertEqual(['messaging'], load(path)
                         .oslo_messaging_notifications.driver)
        self.assertNotIn('mlaccel-config', self.read(path))

    def test_disable_keeps_a_later_choice_of_the_operator(self):
        self.main('enable', '--nova-conf', self.nova)
        text = self.read(self.nova).replace(
            'notification_format = versioned',
            'notification_format = unversioned')
        self.write('nova.conf', text)
        self.main('disable', '--nova-conf', self.nova)
        self.assertEqual('unversioned',
                         load(self.nova).notifications.notification_format)
        self.assertNotIn('mlaccel-config', self.read(self.nova))

    def test_bad_format_refused(self):
        path = self.write('n.conf', PLAIN + '[notifications]\n'
                          'notification_format = verzioned\n')
        self.assertRefused('enable', '--nova-conf', path,
                           says="notification_format is 'verzioned'")


class AttackTest(Base):
    """The editing defects of issue 12, each tried as an attack."""

    def test_group_that_lets_nova_read_the_file_kept(self):
        if os.geteuid() != 0:
            self.skipTest('changing a file\'s group needs root')
        gid = grp.getgrnam('nogroup').gr_gid
        os.chown(self.nova, 0, gid)
        os.chmod(self.nova, 0o640)
        self.assertEqual(0, self.main('enable', '--nova-conf', self.nova))
        st = os.stat(self.nova)
        self.assertEqual((0, gid, 0o640),
                         (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)))

    def test_symlinked_file_edited_through_the_link(self):
        os.mkdir(os.path.join(self.tmp, 'real'))
        target = os.path.join(self.tmp, 'real', 'nova.conf')
        os.rename(self.nova, target)
        os.symlink(target, self.nova)
        self.assertEqual(0, self.main('enable', '--nova-conf', self.nova))
        self.assertTrue(os.path.islink(self.nova))
        self.assertIn('BuildSlotFilter',
                      load(target).filter_scheduler.enabled_filters)
        self.assertEqual(['nova.conf', 'real'], sorted(os.listdir(self.tmp)))

    def test_newline_in_the_statebus_url_refused(self):
        self.assertRefused(
            'enable', '--nova-conf', self.nova, '--statebus-url',
            'redis://h:1\n[DEFAULT]\ntransport_url = rabbit://evil//',
            says='--statebus-url: must be one line')

    def test_dollar_in_the_statebus_url_read_back_unchanged(self):
        url = 'redis://:pa$group@h:6379'
        self.assertEqual(0, self.main('enable', '--nova-conf', self.nova,
                                      '--statebus-url', url))
        self.assertEqual(url, load(self.nova).mlaccel_statebus.backend_url)

    def test_indented_comment_after_enabled_filters(self):
        # oslo.config reads the comment as part of the value, so Nova
        # itself refuses it; it must not turn into a comment holding
        # BuildSlotFilter while the command reports success.
        text = NOVA_CONF.replace(
            '  MyFilter', '  MyFilter\n    # BuildSlotFilter: mlaccel-config')
        self.write('nova.conf', text)
        err = self.assertRefused('enable', '--nova-conf', self.nova,
                                 says='enabled_filters')
        self.assertIn('indented line', err)

    def test_every_write_is_synced(self):
        """File and directory synced (os.fsync wrapped: no crash here)."""
        synced = []
        real_fsync = os.fsync

        def fsync(fd):
            st = os.fstat(fd)
            synced.append('dir' if stat.S_ISDIR(st.st_mode) else
                          os.readlink('/proc/self/fd/%d' % fd))
            real_fsync(fd)
        self.useFixture(fixtures.MonkeyPatch('os.fsync', fsync))
        self.main('enable', '--nova-conf', self.nova)
        self.assertEqual(2, len(synced), synced)
        self.assertIn('.nova.conf.mlaccel-', synced[0])
        self.assertEqual('dir', synced[1])


class BadInputTest(Base):
    """One line on stderr, status 2, nothing changed or created."""

    def test_bad_values(self):
        relative = 'deployment.key'
        self.key(relative)
        open_key = self.key('open.key', mode=0o644)
        short_key = self.key('short.key', 'k')
        for argv, says in [
                (['--statebus-url', 'http://h:1'], 'not a state bus URL'),
                (['--statebus-url', 'file://var/lib'], 'absolute path'),
                (['--statebus-url', 'redis://h:99999'], 'not a valid URL'),
                (['--statebus-url', 'redis://h:1 x'], 'one line'),
                (['--statebus-deployment-key-file', relative], 'absolute'),
                (['--statebus-host-key-file', self.tmp + '/none.key'],
                 'No such file'),
                (['--statebus-deployment-key-file', open_key],
                 'accessible to other users'),
                (['--statebus-deployment-key-file', short_key],
                 'at least 32 characters'),
                (['--statebus-host-key-file', short_key],
                 'with a key of 64 hex digits'),
                (['--cinder-conf', self.nova], 'same file'),
                (['--bogus'], 'unrecognized'),
        ]:
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertRefused('enable', '--nova-conf', self.nova, *argv,
                               says=says)

    def test_bad_files(self):
        cases = {
            'missing': (None, 'No such file'),
            'broken': ('[broken\nx = 1\n', 'cannot parse'),
            'binary': (b'[DEFAULT]\nx = \xff\n', 'not UTF-8'),
            'nosection': ('x = 1\n', 'Section must be started'),
            'dir': ('dir', 'not a regular file'),
        }
        for name, (content, says) in cases.items():
            path = os.path.join(self.tmp, name + '.conf')
            if content == 'dir':
                os.mkdir(path)
            elif isinstance(content, bytes):
                with open(path, 'wb') as f:
                    f.write(content)
            elif content is not None:
                self.write(name + '.conf', content)
            self.stderr.seek(0)
            self.stderr.truncate()
            self.assertRefused('enable', '--nova-conf', self.nova,
                               '--cinder-conf', path, says=says)

    def test_a_hard_link_is_not_split(self):
        os.link(self.nova, os.path.join(self.tmp, 'other.conf'))
        self.assertRefused('enable', '--nova-conf', self.nova,
                           says='2 hard links')

    def run_command(self, *argv, user=None):
        return subprocess.run(
            [sys.executable, '-m', 'mlaccel.cmd.config'] + list(argv),
            capture_output=True, text=True, user=user)

    def test_console_never_shows_a_traceback(self):
        before = self.snapshot()
        for argv in ([], ['enable'], ['enable', '--nova-conf',
                                      self.tmp + '/none.conf'],
                     ['disable', '--nova-conf', self.tmp]):
            proc = self.run_command(*argv)
            self.assertEqual(2, proc.returncode)
            self.assertEqual(1, proc.stderr.count('\n'), proc.stderr)
            self.assertTrue(proc.stderr.startswith('mlaccel-config'),
                            proc.stderr)
        self.assertEqual(before, self.snapshot())

    def test_unreadable_and_unwritable(self):
        if os.geteuid() != 0:
            self.skipTest('running as another user needs root')
        try:
            subprocess.run([sys.executable, '-c', ''], user='nobody',
                           check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            self.skipTest('nobody cannot run this Python (%s): its '
                          'installation is private to root' % exc)
        os.chmod(self.nova, 0o600)
        os.chmod(self.tmp, 0o777)
        proc = self.run_command('enable', '--nova-conf', self.nova,
                                user='nobody')
        self.assertEqual((2, 'mlaccel-config: error: cannot read %s: '
                          'Permission denied\n' % self.nova),
                         (proc.returncode, proc.stderr))
        # Readable and writable, but owned by root: it cannot be replaced
        # by a file of the same owner, so it is left alone.
        os.chmod(self.nova, 0o666)
        before = self.snapshot()
        proc = self.run_command('enable', '--nova-conf', self.nova,
                                user='nobody')
        self.assertEqual(2, proc.returncode)
        self.assertIn('cannot keep the owner and group', proc.stderr)
        self.assertEqual(before, self.snapshot())
