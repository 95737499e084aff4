"""mlaccel-config: make the configuration edits that enable mlaccel.

One command for every way of deploying mlaccel (the devstack plugin, the
all-in-one test cloud, an operator's config management), so they all enable
the same thing::

    mlaccel-config enable --nova-conf /etc/nova/nova.conf \\
        [--cinder-conf /etc/cinder/cinder.conf] [--statebus-url URL]
    mlaccel-config disable --nova-conf /etc/nova/nova.conf

``enable`` adds mlaccel's filters to ``[filter_scheduler]
available_filters`` (a multi-valued option: the existing lines stay), adds
``BuildSlotFilter`` to ``enabled_filters`` and mlaccel's weighers to
``weight_classes`` (starting from Nova's defaults when a key is unset), and
sets ``[mlaccel_statebus] backend_url``. Running it twice changes nothing.
Files are edited line by line: comments, order and repeated keys are kept;
a file is replaced atomically and only when its content changes. A file
that cannot be parsed is reported and left untouched.
"""

import argparse
import os
import re
import sys
import tempfile

from oslo_config import cfg
from oslo_config import iniparser

SCHEDULER_GROUP = 'filter_scheduler'
STATEBUS_GROUP = 'mlaccel_statebus'
MLACCEL_FILTERS = 'mlaccel.scheduler.filters.all_filters'
MLACCEL_WEIGHERS = 'mlaccel.scheduler.weights.all_weighers'
MLACCEL_ENABLED_FILTERS = ('BuildSlotFilter',)

_SECTION_RE = re.compile(r'^\[([^\]]+)\]\s*$')
_KEY_RE = re.compile(r'^([^\s=:#;][^=:]*?)\s*[=:]')


class ConfigError(Exception):
    """A configuration file that cannot be edited, with the reason."""


class IniFile:
    """An ini file edited line by line.

    Values are read the way oslo.config reads them (a key given several
    times has several values, which a ``MultiStrOpt`` keeps). Writing
    replaces only the lines of the keys set.
    """

    def __init__(self, path):
        self.path = path
        self.sections = {}
        try:
            with open(path) as f:
                self.lines = f.read().splitlines()
            cfg.ConfigParser(path, self.sections).parse()
        except OSError as exc:
            raise ConfigError('cannot read %s: %s' % (path, exc.strerror))
        except iniparser.ParseError as exc:
            raise ConfigError('cannot parse %s: %s' % (path, exc))
        self._original = list(self.lines)

    def get(self, section, key):
        """All values of ``key`` in ``section``, in file order, or None."""
        return self.sections.get(section, {}).get(key)

    def set(self, section, key, values):
        """Make ``values`` (one line each) the only values of ``key``."""
        values = list(values)
        new = ['%s = %s' % (key, value) for value in values]
        start, end = self._section_span(section)
        if start is None:
            if self.lines and self.lines[-1].strip():
                self.lines.append('')
            self.lines.append('[%s]' % section)
            self.lines.extend(new)
        else:
            position, kept, index = None, [], start + 1
            while index < end:
                line = self.lines[index]
                match = _KEY_RE.match(line)
                if match and match.group(1) == key:
                    position = len(kept) if position is None else position
                    index += 1
                    # Drop the continuation lines of a multi-line value.
                    while index < end and self.lines[index][:1] in (' ',
                                                                    '\t'):
                        index += 1
                    continue
                kept.append(line)
                index += 1
            if position is None:
                position = len(kept)
                while position and not kept[position - 1].strip():
                    position -= 1
            kept[position:position] = new
            self.lines[start + 1:end] = kept
        self.sections.setdefault(section, {})[key] = values

    def changed(self):
        return self.lines != self._original

    def save(self):
        """Write the file atomically if it changed; return whether it did."""
        if not self.changed():
            return False
        directory = os.path.dirname(os.path.abspath(self.path))
        mode = os.stat(self.path).st_mode & 0o7777
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.mlaccel-config-')
        try:
            with os.fdopen(fd, 'w') as f:
                f.write('\n'.join(self.lines) + '\n')
            os.chmod(tmp, mode)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
        self._original = list(self.lines)
        return True

    def _section_span(self, section):
        start = None
        for index, line in enumerate(self.lines):
            match = _SECTION_RE.match(line.strip())
            if match is None:
                continue
            if start is not None:
                return start, index
            if match.group(1) == section:
                start = index
        return start, len(self.lines)


def _nova_default(name):
    """The default of a ``[filter_scheduler]`` option, from Nova itself."""
    try:
        from nova.conf import scheduler
    except ImportError:
        raise ConfigError('[%s] %s is not set and nova is not importable to '
                          'read its default; set it in the file first'
                          % (SCHEDULER_GROUP, name))
    for opt in scheduler.filter_scheduler_opts:
        if opt.name == name:
            return list(opt.default)
    raise ConfigError('nova has no option [%s] %s' % (SCHEDULER_GROUP, name))


def _list_value(ini, name):
    values = ini.get(SCHEDULER_GROUP, name)
    if values is None:
        return _nova_default(name)
    # oslo.config keeps the last of repeated single-valued options.
    return [item.strip() for item in values[-1].split(',') if item.strip()]


def _multi_value(ini, name):
    values = ini.get(SCHEDULER_GROUP, name)
    return list(values) if values is not None else _nova_default(name)


def _with(items, extra):
    return items + [item for item in extra if item not in items]


def _without(items, extra):
    return [item for item in items if item not in extra]


def enable_nova(ini, statebus_url=None):
    """Apply the nova.conf edits that enable mlaccel's scheduler plugins."""
    ini.set(SCHEDULER_GROUP, 'available_filters',
            _with(_multi_value(ini, 'available_filters'), [MLACCEL_FILTERS]))
    ini.set(SCHEDULER_GROUP, 'enabled_filters', [','.join(_with(
        _list_value(ini, 'enabled_filters'), MLACCEL_ENABLED_FILTERS))])
    ini.set(SCHEDULER_GROUP, 'weight_classes', [','.join(_with(
        _list_value(ini, 'weight_classes'), [MLACCEL_WEIGHERS]))])
    if statebus_url:
        ini.set(STATEBUS_GROUP, 'backend_url', [statebus_url])


def disable_nova(ini):
    """Undo :func:`enable_nova`'s scheduler edits (the bus URL stays)."""
    if ini.get(SCHEDULER_GROUP, 'available_filters') is not None:
        ini.set(SCHEDULER_GROUP, 'available_filters', _without(
            _multi_value(ini, 'available_filters'), [MLACCEL_FILTERS]))
    if ini.get(SCHEDULER_GROUP, 'enabled_filters') is not None:
        ini.set(SCHEDULER_GROUP, 'enabled_filters', [','.join(_without(
            _list_value(ini, 'enabled_filters'), MLACCEL_ENABLED_FILTERS))])
    if ini.get(SCHEDULER_GROUP, 'weight_classes') is not None:
        ini.set(SCHEDULER_GROUP, 'weight_classes', [','.join(_without(
            _list_value(ini, 'weight_classes'), [MLACCEL_WEIGHERS]))])


def enable_cinder(ini, statebus_url=None):
    """Apply the cinder.conf edits (the state bus the cache driver uses)."""
    if statebus_url:
        ini.set(STATEBUS_GROUP, 'backend_url', [statebus_url])


def _parser():
    parser = argparse.ArgumentParser(
        prog='mlaccel-config',
        description='Enable or disable mlaccel in OpenStack service '
                    'configuration files. Idempotent.')
    sub = parser.add_subparsers(dest='action', required=True)
    enable = sub.add_parser('enable', help='enable mlaccel')
    enable.add_argument('--nova-conf', required=True,
                        help='nova.conf of the scheduler to edit')
    enable.add_argument('--cinder-conf',
                        help='cinder.conf to edit (state bus settings)')
    enable.add_argument('--statebus-url',
                        help='tooz URL of the state bus, written to '
                             '[mlaccel_statebus] backend_url')
    disable = sub.add_parser('disable', help='remove the scheduler edits')
    disable.add_argument('--nova-conf', required=True,
                         help='nova.conf of the scheduler to edit')
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        # Read every file first: a bad one stops the command before any
        # file is written.
        nova = IniFile(args.nova_conf)
        cinder = IniFile(args.cinder_conf) \
            if getattr(args, 'cinder_conf', None) else None
        if args.action == 'enable':
            enable_nova(nova, args.statebus_url)
            if cinder is not None:
                enable_cinder(cinder, args.statebus_url)
        else:
            disable_nova(nova)
        for ini in (nova, cinder):
            if ini is not None:
                print('%s: %s' % (ini.path,
                                  'updated' if ini.save() else 'unchanged'))
    except ConfigError as exc:
        print('mlaccel-config: error: %s' % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
