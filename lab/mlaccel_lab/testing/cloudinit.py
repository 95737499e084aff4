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

"""The part of cloud-init the test virt driver emulates.

Which guest process a server's user-data starts, and the files it writes
first.

A guest has no disk of its own here, so its file system is a directory on
the compute host, the *guest root*: ``write_files`` entries land under it,
and every path they name is rewritten to its place under the root wherever
it appears (in the other files and in the command line). The guest command
is the first of these that ``[mlaccel_test_driver] guest_commands`` allows:

- a ``runcmd`` entry (a list, or a string split like a shell would);
- for ``systemctl enable --now UNIT`` (or ``start``/``restart``), the
  ``ExecStart`` of a unit the user-data wrote, with systemd's
  ``RuntimeDirectory=`` and ``LogsDirectory=`` made under the root and
  passed in ``RUNTIME_DIRECTORY`` and ``LOGS_DIRECTORY``;
- a line of a ``#!`` user-data script.

An allowed entry matches word by word: the command's name exactly (any
``python``, ``python3`` or ``python3.N`` counts as ``python``), then each
following word exactly, except that a last word ending in ``.`` (such as
``mlaccel.``) matches a dotted module name in that package. The program run
is always the compute's own (its interpreter, or the command installed
beside it), never a file the user-data wrote. Nothing else runs: no package
installs, no shell.
"""

import base64
import binascii
import configparser
import dataclasses
import os
import re
import shlex
import sys

import yaml

_UNIT_DIRS = ('/etc/systemd/system/', '/lib/systemd/system/',
              '/usr/lib/systemd/system/')
_START_VERBS = ('start', 'restart', 'enable')
_PYTHON = re.compile(r'^python(3(\.[0-9]+)?)?$')
_MODULE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$')


@dataclasses.dataclass
class Guest:
    """What to write and run for one server."""

    argv: list
    env: dict = dataclasses.field(default_factory=dict)
    #: ``(path under the root, bytes, mode)`` to write before starting.
    files: list = dataclasses.field(default_factory=list)
    #: Directories to make before starting.
    dirs: list = dataclasses.field(default_factory=list)


def decode(user_data):
    """The user-data text, or ``None`` if there is none or it is not text."""
    if not user_data:
        return None
    try:
        return base64.b64decode(user_data, validate=True).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


def guest(user_data, allowed, root):
    """The :class:`Guest` the user-data asks for, or ``None``.

    :param user_data: base64-encoded user-data, as Nova stores it.
    :param allowed: command-line prefixes a guest may start with.
    :param root: the guest root directory on the compute host.
    """
    text = decode(user_data)
    if text is None:
        return None
    if text.startswith('#!'):
        entries = [line for line in text.splitlines()[1:]
                   if line.strip() and not line.lstrip().startswith('#')]
        return _first_allowed(entries, {}, allowed, root)
    if not text.startswith('#cloud-config'):
        return None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    written = _written_files(doc.get('write_files'))
    entries = doc.get('runcmd')
    if not isinstance(entries, list):
        return None
    found = _first_allowed(entries, written, allowed, root)
    if found is not None:
        found.files = [
            (_relocate(path, root), _relocate_text(content, written, root)
             .encode(), mode) for path, (content, mode) in written.items()]
    return found


def _written_files(entries):
    """``{absolute path: (content, mode)}`` of usable write_files."""
    files = {}
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        path, content = entry.get('path'), entry.get('content', '')
        if not isinstance(path, str) or not path.startswith('/') or \
                '..' in path.split('/') or not isinstance(content, str):
            continue
        if entry.get('encoding') in ('b64', 'base64'):
            try:
                content = base64.b64decode(content).decode()
            except (binascii.Error, ValueError, UnicodeDecodeError):
                continue
        try:
            mode = int(str(entry.get('permissions', '0644')), 8)
        except ValueError:
            mode = 0o644
        files[path] = (content, mode & 0o777)
    return files


def _first_allowed(entries, written, allowed, root):
    for entry in entries:
        argv = _split(entry)
        if not argv:
            continue
        spec = _unit_start(argv, written, root)
        if spec is None:
            spec = Guest(argv)
        spec.argv = [_relocate(arg, root) if arg in written else arg
                     for arg in spec.argv]
        if spec.argv and _allowed(spec.argv, allowed):
            spec.argv = _resolve(spec.argv)
            if spec.argv is not None:
                return spec
    return None


def _split(entry):
    try:
        if isinstance(entry, str):
            return shlex.split(entry)
        if isinstance(entry, list):
            return [str(arg) for arg in entry]
    except ValueError:
        pass
    return None


def _unit_start(argv, written, root):
    """A unit's ExecStart for ``systemctl enable --now UNIT`` and kin."""
    if os.path.basename(argv[0]) != 'systemctl' or len(argv) < 3:
        return None
    verb, args = argv[1], [arg for arg in argv[2:] if arg != '--now']
    if verb not in _START_VERBS or (verb == 'enable' and '--now' not in
                                    argv) or len(args) != 1:
        return None
    unit = args[0] if args[0].endswith('.service') else args[0] + '.service'
    text = next((written[d + unit][0] for d in _UNIT_DIRS
                 if d + unit in written), None)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
        service = parser['Service']
    except (configparser.Error, KeyError):
        return None
    exec_start = _split(service.get('ExecStart', '').lstrip('-@+!'))
    if not exec_start:
        return None
    spec = Guest(exec_start)
    for key, var, base in (('RuntimeDirectory', 'RUNTIME_DIRECTORY', '/run'),
                           ('LogsDirectory', 'LOGS_DIRECTORY', '/var/log')):
        name = service.get(key, '').split()
        if name and '..' not in name[0].split('/'):
            path = _relocate(os.path.join(base, name[0]), root)
            spec.dirs.append(path)
            spec.env[var] = path
    return spec


def _relocate(path, root):
    return os.path.join(root, path.lstrip('/'))


def _relocate_text(text, written, root):
    # Longest first, so that no path is rewritten inside a longer one.
    for path in sorted(written, key=len, reverse=True):
        text = text.replace(path, _relocate(path, root))
    return text


def _name(program):
    name = os.path.basename(program)
    return 'python' if _PYTHON.match(name) else name


def _matches(words, entry):
    """Whether the command ``words`` begins with the allowed ``entry``."""
    wanted = entry.split()
    if not wanted or len(words) < len(wanted):
        return False
    for index, (word, want) in enumerate(zip(words, wanted)):
        if index == len(wanted) - 1 and index and want.endswith('.'):
            if not (word.startswith(want) and len(word) > len(want)
                    and _MODULE.match(word)):
                return False
        elif word != want:
            return False
    return True


def _allowed(argv, allowed):
    words = [_name(argv[0])] + argv[1:]
    return any(_matches(words, entry) for entry in allowed)


def _resolve(argv):
    """The compute's own program for ``argv``, or ``None`` if it has none.

    Python runs on the compute service's interpreter, other commands from
    its environment's ``bin`` directory: never a file the user-data wrote.
    """
    name = _name(argv[0])
    if name == 'python':
        return [sys.executable] + argv[1:]
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside] + argv[1:]
    return None
