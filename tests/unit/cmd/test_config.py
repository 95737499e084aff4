"""mlaccel-config: the nova.conf / cinder.conf edits that enable mlaccel."""

import io
import os

import fixtures
from oslo_config import cfg
import testtools

from mlaccel.cmd import config

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


class MlaccelConfigTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.nova = self.write('nova.conf', NOVA_CONF)
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', io.StringIO()))

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def read(self, path):
        with open(path) as f:
            return f.read()

    def load(self, path):
        """The options as Nova's services would read them."""
        from nova.conf import scheduler
        conf = cfg.ConfigOpts()
        conf.register_opts(scheduler.filter_scheduler_opts,
                           group='filter_scheduler')
        conf.register_opt(cfg.StrOpt('backend_url'), group='mlaccel_statebus')
        conf(['--config-file', path])
        return conf

    def test_enable_keeps_multistr_values_and_comments(self):
        self.assertEqual(0, config.main(['enable', '--nova-conf', self.nova,
                                         '--statebus-url', 'redis://h:1']))
        conf = self.load(self.nova)
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
        config.main(['enable', '--nova-conf', self.nova])
        once = self.read(self.nova)
        mtime = os.stat(self.nova).st_mtime_ns
        config.main(['enable', '--nova-conf', self.nova])
        self.assertEqual(once, self.read(self.nova))
        self.assertEqual(mtime, os.stat(self.nova).st_mtime_ns)

    def test_unset_options_start_from_nova_defaults(self):
        path = self.write('bare.conf', '[DEFAULT]\nhost = x\n')
        config.main(['enable', '--nova-conf', path])
        conf = self.load(path)
        from nova.conf import scheduler
        default = [opt.default for opt in scheduler.filter_scheduler_opts
                   if opt.name == 'enabled_filters'][0]
        self.assertEqual(default + ['BuildSlotFilter'],
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          config.MLACCEL_FILTERS],
                         conf.filter_scheduler.available_filters)

    def test_disable_undoes_enable(self):
        config.main(['enable', '--nova-conf', self.nova])
        config.main(['disable', '--nova-conf', self.nova])
        conf = self.load(self.nova)
        self.assertNotIn(config.MLACCEL_FILTERS,
                         conf.filter_scheduler.available_filters)
        self.assertEqual(['ComputeFilter', 'MyFilter'],
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual(['nova.scheduler.weights.all_weighers'],
                         conf.filter_scheduler.weight_classes)

    def test_cinder_gets_the_statebus(self):
        cinder = self.write('cinder.conf', '[DEFAULT]\nhost = c\n')
        config.main(['enable', '--nova-conf', self.nova, '--cinder-conf',
                     cinder, '--statebus-url', 'file:///var/lib/bus'])
        self.assertIn('[mlaccel_statebus]\nbackend_url = file:///var/lib/bus',
                      self.read(cinder))

    def test_bad_file_changes_nothing(self):
        bad = self.write('cinder.conf', '[broken\nx = 1\n')
        stderr = self.useFixture(fixtures.StringStream('stderr'))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr.stream))
        self.assertEqual(2, config.main(['enable', '--nova-conf', self.nova,
                                         '--cinder-conf', bad]))
        self.assertEqual(NOVA_CONF, self.read(self.nova))
        self.assertEqual('[broken\nx = 1\n', self.read(bad))
        stderr.stream.flush()
        self.assertIn('cannot parse', stderr.getDetails()['stderr'].as_text())

    def test_missing_file_is_an_error(self):
        self.assertEqual(2, config.main(
            ['enable', '--nova-conf', os.path.join(self.tmp, 'none.conf')]))

    def test_file_mode_kept(self):
        os.chmod(self.nova, 0o640)
        config.main(['enable', '--nova-conf', self.nova])
        self.assertEqual(0o640, os.stat(self.nova).st_mode & 0o777)
        self.assertEqual(['nova.conf'], os.listdir(self.tmp))
