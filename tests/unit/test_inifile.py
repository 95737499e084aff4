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

"""mlaccel.inifile: read as oslo.config reads, edit, write safely."""

import os

import fixtures
from oslo_config import cfg

from mlaccel import inifile

from tests import testcase

TRICKY = """\
[DEFAULT]
host = a

[s]
k = one
m = "quoted"
c: colon=value
[S]
k = two
  continued
\tby a tab
    # an indented comment continues the value too
[t]
k = "only"
[s]
k = three
"""


def oslo_values(path, names):
    """What oslo.config gives each (group, key) as a multi-valued option."""
    conf = cfg.ConfigOpts()
    for group, key in names:
        conf.register_opt(cfg.MultiStrOpt(key),
                          group=None if group == 'DEFAULT' else group)
    conf(['--config-file', path])
    return {(g, k): conf[k] if g == 'DEFAULT' else conf[g][k]
            for g, k in names}


class IniFileTest(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, text, name='x.conf', mode='w'):
        path = os.path.join(self.tmp, name)
        with open(path, mode) as f:
            f.write(text)
        return path

    def read(self, path):
        with open(path, 'rb') as f:
            return f.read()

    NAMES = [('DEFAULT', 'host'), ('s', 'k'), ('s', 'm'), ('s', 'c'),
             ('t', 'k')]

    def assertReadsLikeOslo(self, path):
        ini = inifile.IniFile(path)
        expected = oslo_values(path, self.NAMES)
        self.assertEqual(expected, {name: ini.get(*name) or []
                                    for name in self.NAMES})

    def test_reads_like_oslo_config(self):
        path = self.write(TRICKY)
        self.assertReadsLikeOslo(path)
        ini = inifile.IniFile(path)
        self.assertEqual(['one', 'two\ncontinued\nby a tab\n# an indented '
                          'comment continues the value too', 'three'],
                         ini.get('s', 'k'))
        self.assertEqual(['quoted'], ini.get('s', 'm'))

    def test_edits_read_back_like_oslo_config(self):
        path = self.write(TRICKY)
        ini = inifile.IniFile(path)
        ini.add('s', 'k', 'four')
        ini.set('t', 'k', ['new'])
        ini.set('s', 'm', ['x', 'y'])
        ini.add('u', 'k', 'in a new section')
        self.assertTrue(ini.save())
        self.assertEqual(
            {('s', 'k'): ['one', 'two\ncontinued\nby a tab\n# an indented '
                          'comment continues the value too', 'three', 'four'],
             ('t', 'k'): ['new'], ('s', 'm'): ['x', 'y'],
             ('u', 'k'): ['in a new section']},
            oslo_values(path, [('s', 'k'), ('t', 'k'), ('s', 'm'),
                               ('u', 'k')]))
        text = self.read(path).decode()
        self.assertIn('    # an indented comment continues the value too\n'
                      '[t]\nk = new\n', text)
        self.assertTrue(text.endswith('k = three\nk = four\n\n[u]\n'
                                      'k = in a new section\n'))

    def test_set_replaces_repeated_single_values_at_the_last_place(self):
        path = self.write('[s]\nk = 1\nj = 2\n[S]\nk = 3\nl = 4\n')
        ini = inifile.IniFile(path)
        ini.set('s', 'k', ['5'])
        self.assertEqual('[s]\nj = 2\n[S]\nk = 5\nl = 4\n', ini.text())

    def test_line_endings_and_a_missing_last_newline_kept(self):
        path = self.write(b'[s]\r\nk = 1\r\nj = 2', mode='wb')
        ini = inifile.IniFile(path)
        ini.add('s', 'k', '3')
        ini.add('s', 'j', '4')
        ini.save()
        self.assertEqual(b'[s]\r\nk = 1\r\nk = 3\r\nj = 2\r\nj = 4\r\n',
                         self.read(path))

    def test_values_that_would_read_back_otherwise_refused(self):
        path = self.write(TRICKY)
        ini = inifile.IniFile(path)
        for value in ('a\n[DEFAULT]\ntransport_url = x', 'a\nb', ' a',
                      '"a"', "'a'", 'a\r'):
            self.assertRaises(inifile.Error, ini.set, 's', 'k', [value])
            self.assertRaises(inifile.Error, ini.add, 't', 'k', value)
        self.assertFalse(ini.changed())
        self.assertFalse(ini.save())
        self.assertEqual(TRICKY.encode(), self.read(path))

    def test_notes(self):
        path = self.write('[s]\nk = 1\n')
        ini = inifile.IniFile(path)
        ini.add('s', 'k', '2', note='ours')
        ini.set('t', 'j', ['x'], note='ours too')
        self.assertEqual([('ours', '2')], ini.notes('s', 'k'))
        ini.replace_noted('s', 'k', 'ours', None)
        ini.replace_noted('t', 'j', 'ours too', None)
        self.assertEqual('[s]\nk = 1\n', ini.text())

    def test_a_file_changed_meanwhile_is_not_overwritten(self):
        path = self.write('[s]\nk = 1\n')
        ini = inifile.IniFile(path)
        ini.add('s', 'k', '2')
        self.write('[s]\nk = 1\nj = 9\n')
        self.assertRaises(inifile.Error, ini.prepare)
        self.assertEqual(b'[s]\nk = 1\nj = 9\n', self.read(path))
        self.assertEqual(['x.conf'], os.listdir(self.tmp))

    def test_extended_attributes_kept(self):
        path = self.write('[s]\nk = 1\n')
        try:
            os.setxattr(path, 'user.mlaccel', b'kept')
        except OSError:
            self.skipTest('no user extended attributes here')
        ini = inifile.IniFile(path)
        ini.add('s', 'k', '2')
        ini.save()
        self.assertEqual(b'kept', os.getxattr(path, 'user.mlaccel'))

    def test_parse_errors_like_oslo_config(self):
        for text in ('k = 1\n', '[s\n', '[s]\n  x\n', '[s]\n= 1\n',
                     '[s]\nk\n', '[s]\nk = 1\n\n  x\n', '\ufeff[s]\n'):
            path = self.write(text)
            self.assertRaises(cfg.ConfigFileParseError, oslo_values, path,
                              [('s', 'k')])
            self.assertRaises(inifile.Error, inifile.IniFile, path)
