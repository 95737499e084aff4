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

"""Edit an oslo.config INI file in place, reading it as oslo.config does.

Values are read by oslo.config's own parser (:mod:`oslo_config.iniparser`):
a key given several times has several values, an indented line continues
the value above it (even a line starting with ``#``), and section names
match the way oslo.config matches groups. Each edit touches only the lines
of the key it changes, and is checked by parsing the result again: the file
must read back with the intended values and every other value unchanged.

:meth:`IniFile.prepare` and :meth:`Pending.commit` replace the file
atomically, writing through symlinks to the real file, keeping its owner,
group, mode and extended attributes (ACLs, security labels), and syncing
the file and its directory to disk.

Round-trip INI libraries were tried and rejected: configupdater and
iniparse read these files differently from oslo.config (quoted values,
repeated sections, the case of keys, blank lines inside values, or all but
one value of a repeated key), and this module exists to see what the
services see.
"""

import errno
import os
import re
import stat
import tempfile
import typing

from oslo_config import iniparser

#: Larger files are refused: an operator's service configuration is far
#: smaller, so a larger file is not one.
MAX_BYTES = 16 * 1024 * 1024

_LINES_RE = re.compile(r'[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z')


class Error(Exception):
    """A file that cannot be read, edited or written; says why."""


def normalize_group(name):
    """A section name as oslo.config matches it to an option group."""
    return name if name == 'DEFAULT' else name.lower()


class _Entry(typing.NamedTuple):
    group: str
    key: str
    value: str
    start: int
    end: int


class _Parser(iniparser.BaseParser):
    """oslo.config's parser, noting the lines each assignment spans."""

    def __init__(self):
        super().__init__()
        self.group = None
        self.headers = []
        self.entries = []
        self._eof = False

    def parse(self, lines):
        def feed():
            yield from lines
            self._eof = True
        super().parse(feed())

    def new_section(self, section):
        self.group = normalize_group(section)
        self.headers.append((self.group, self.lineno - 1))

    def assignment(self, key, value):
        if self.group is None:
            # The same error as oslo_config.cfg.ConfigParser.
            raise self.parse_exc('Section must be started before assignment',
                                 self.lineno, '')
        # Called on the line after the value (or at the end of the file).
        end = self.lineno if self._eof else self.lineno - 1
        self.entries.append(_Entry(self.group, key, '\n'.join(value),
                                   end - len(value), end))


def _values(entries):
    values = {}
    for entry in entries:
        values.setdefault((entry.group, entry.key), []).append(entry.value)
    return values


class IniFile:
    """An INI file read as oslo.config reads it, edited line by line."""

    def __init__(self, path):
        self.path = path
        self.real_path = os.path.realpath(path)
        self._raw = _read(path, self.real_path)
        try:
            text = self._raw.decode('utf-8')
        except UnicodeDecodeError as exc:
            raise Error('cannot read %s: not UTF-8 text (byte %d)'
                        % (path, exc.start))
        self.lines = _LINES_RE.findall(text)
        self._newline = '\r\n' if self.lines and \
            self.lines[0].endswith('\r\n') else '\n'
        self._parser = self._parse(self.lines)

    def _parse(self, lines):
        parser = _Parser()
        try:
            parser.parse(lines)
        except iniparser.ParseError as exc:
            raise Error('cannot parse %s: %s' % (self.path, exc))
        return parser

    def text(self):
        return ''.join(self.lines)

    def changed(self):
        return self.text().encode('utf-8') != self._raw

    def get(self, group, key):
        """All values of ``key`` in ``group``, in file order, or None."""
        return _values(self._entries(group, key)).get(
            (normalize_group(group), key))

    def notes(self, group, key):
        """``(comment, value)`` of each value with a comment line above."""
        return [(_note(self.lines, e), e.value)
                for e in self._entries(group, key)
                if _note(self.lines, e) is not None]

    def set(self, group, key, values, note=None):
        """Make ``values`` the only values of ``key``, at its last place.

        ``note``, a one-line comment, is written above the first value.
        """
        values = list(values)
        entries = self._entries(group, key)
        if [e.value for e in entries] == values and note is None:
            return
        new = self._assignments(key, values, note)
        lines = list(self.lines)
        if entries:
            last = entries[-1]
            lines[last.start:last.end] = new
            for entry in reversed(entries[:-1]):
                del lines[entry.start:entry.end]
        else:
            self._insert(lines, group, new)
        self._commit(lines, group, key, values)

    def add(self, group, key, value, note=None):
        """Add one value to ``key`` after its last one."""
        entries = self._entries(group, key)
        lines = list(self.lines)
        new = self._assignments(key, [value], note)
        if entries:
            self._insert_at(lines, entries[-1].end, new)
        else:
            self._insert(lines, group, new)
        self._commit(lines, group, key,
                     [e.value for e in entries] + [value])

    def remove(self, group, key, value):
        """Remove every line that gives ``key`` the value ``value``."""
        lines = list(self.lines)
        expected = []
        for entry in reversed(self._entries(group, key)):
            if entry.value == value:
                del lines[entry.start:entry.end]
            else:
                expected.insert(0, entry.value)
        self._commit(self._without_empty(lines, group), group, key,
                     expected or None)

    def replace_noted(self, group, key, note, value):
        """Drop ``note`` and set the values below it to ``value``.

        With ``value`` None the noted values are removed.
        """
        lines = list(self.lines)
        expected = []
        for entry in reversed(self._entries(group, key)):
            if _note(lines, entry) == note:
                lines[entry.start - 1:entry.end] = [] if value is None else \
                    self._assignments(key, [value], None)
                if value is not None:
                    expected.insert(0, value)
            else:
                expected.insert(0, entry.value)
        self._commit(self._without_empty(lines, group), group, key,
                     expected or None)

    def _without_empty(self, lines, group):
        """``lines`` without the sections of ``group`` left empty.

        A section holding only blank lines is dropped with the blank line
        above it, so removing what was added restores the text.
        """
        try:
            parser = self._parse(lines)
        except Error:
            return lines  # refused by _commit
        lines = list(lines)
        group = normalize_group(group)
        bounds = [h for _, h in parser.headers] + [len(lines)]
        for index in range(len(parser.headers) - 1, -1, -1):
            name, header = parser.headers[index]
            body = lines[header + 1:bounds[index + 1]]
            if name != group or any(line.strip() for line in body):
                continue
            if header and not lines[header - 1].strip():
                del lines[header - 1:header + 1]
            else:
                del lines[header:header + 1 + min(len(body), 1)]
        return lines

    def _entries(self, group, key):
        group = normalize_group(group)
        return [e for e in self._parser.entries
                if e.group == group and e.key == key]

    def _assignments(self, key, values, note):
        lines = ['# %s' % note] if note is not None else []
        lines += ['%s = %s' % (key, value) for value in values]
        return [line + self._newline for line in lines]

    def _insert(self, lines, group, new):
        """Insert ``new`` at the end of the last section of ``group``."""
        group = normalize_group(group)
        headers = self._parser.headers
        for index in range(len(headers) - 1, -1, -1):
            name, header = headers[index]
            if name != group:
                continue
            following = headers[index + 1][1] if index + 1 < len(headers) \
                else len(lines)
            ends = [e.end for e in self._parser.entries
                    if header < e.start < following]
            self._insert_at(lines, max(ends, default=header + 1), new)
            return
        if lines and lines[-1].strip():
            self._insert_at(lines, len(lines), [self._newline])
        self._insert_at(lines, len(lines),
                        ['[%s]%s' % (group, self._newline)] + new)

    def _insert_at(self, lines, index, new):
        if index and not lines[index - 1].endswith(('\n', '\r')):
            lines[index - 1] += self._newline
        lines[index:index] = new

    def _commit(self, lines, group, key, expected):
        """Take ``lines`` if they read back as intended."""
        # Split again: a value may hold a line break.
        lines = _LINES_RE.findall(''.join(lines))
        expected_values = _values(self._parser.entries)
        name = (normalize_group(group), key)
        expected_values.pop(name, None)
        if expected:
            expected_values[name] = list(expected)
        try:
            parser = self._parse(lines)
        except Error:
            parser = None
        if parser is None or _values(parser.entries) != expected_values:
            raise Error('cannot set [%s] %s in %s: the file would not read '
                        'back as intended (a value with a line break, '
                        'leading or trailing spaces or quotes?)'
                        % (group, key, self.path))
        self.lines, self._parser = lines, parser

    def save(self):
        """Write the file if it changed; return whether it did."""
        pending = self.prepare()
        if pending is not None:
            pending.commit()
        return pending is not None

    def prepare(self):
        """Write the new content beside the file; None if unchanged.

        Nothing is visible until :meth:`Pending.commit`; on error nothing
        is left behind.
        """
        if not self.changed():
            return None
        if _read(self.path, self.real_path) != self._raw:
            raise Error('%s changed while it was being edited; run the '
                        'command again' % self.path)
        st = os.stat(self.real_path)
        if st.st_nlink > 1:
            raise Error('%s has %d hard links; replacing it would separate '
                        'them' % (self.path, st.st_nlink))
        directory, name = os.path.split(self.real_path)
        try:
            fd, tmp = tempfile.mkstemp(dir=directory,
                                       prefix='.%s.mlaccel-' % name)
        except OSError as exc:
            raise Error('cannot write %s: %s' % (self.path, exc.strerror))
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(self.text().encode('utf-8'))
                f.flush()
                _copy_metadata(self.path, self.real_path, st, f.fileno())
                os.fsync(f.fileno())
        except BaseException as exc:
            os.unlink(tmp)
            if isinstance(exc, OSError):
                raise Error('cannot write %s: %s' % (self.path, exc.strerror))
            raise
        return Pending(self, tmp)


class Pending:
    """New content written and synced beside the file it replaces."""

    def __init__(self, ini, tmp):
        self.ini = ini
        self.tmp = tmp

    def commit(self):
        real = self.ini.real_path
        try:
            os.replace(self.tmp, real)
            fd = os.open(os.path.dirname(real), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self.abort()
            raise Error('cannot write %s: %s' % (self.ini.path, exc.strerror))
        self.ini._raw = self.ini.text().encode('utf-8')

    def abort(self):
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def _note(lines, entry):
    """The text of a ``#`` comment line right above ``entry``, or None."""
    above = lines[entry.start - 1] if entry.start else ''
    return above[1:].strip() if above.startswith('#') else None


def _read(path, real_path):
    """The bytes of a regular file (never blocking on a FIFO)."""
    try:
        fd = os.open(real_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise Error('cannot read %s: %s' % (path, exc.strerror))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Error('cannot read %s: not a regular file' % path)
        if st.st_size > MAX_BYTES:
            raise Error('cannot read %s: larger than %d bytes'
                        % (path, MAX_BYTES))
        data = b''
        while chunk := os.read(fd, 1 << 16):
            data += chunk
            if len(data) > MAX_BYTES:
                raise Error('cannot read %s: larger than %d bytes'
                            % (path, MAX_BYTES))
        return data
    except OSError as exc:
        raise Error('cannot read %s: %s' % (path, exc.strerror))
    finally:
        os.close(fd)


def _copy_metadata(path, real_path, st, fd):
    """Give ``fd`` the owner, group, mode and xattrs of the file ``st``."""
    own = os.fstat(fd)
    if (own.st_uid, own.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except PermissionError:
            raise Error('cannot keep the owner and group of %s (%d:%d); run '
                        'as root or as its owner' % (path, st.st_uid,
                                                     st.st_gid))
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    try:
        names = os.listxattr(real_path)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        names = []
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(real_path, name))
        except OSError as exc:
            raise Error('cannot keep the extended attribute %s of %s: %s'
                        % (name, path, exc.strerror))
