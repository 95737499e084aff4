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

"""mlaccel-config: make the configuration edits that enable mlaccel.

One command for every way of deploying mlaccel (the devstack plugin, the
all-in-one test cloud, an operator's config management), so they all enable
the same thing::

    mlaccel-config enable --nova-conf /etc/nova/nova.conf \\
        [--cinder-conf /etc/cinder/cinder.conf] [--statebus-url URL] \\
        [--cinder-mirror-backend SECTION ...] \\
        [--statebus-deployment-key-file FILE] [--statebus-host-key-file FILE]
    mlaccel-config disable --nova-conf /etc/nova/nova.conf \\
        [--cinder-conf /etc/cinder/cinder.conf]

``enable`` adds mlaccel's filters to ``[filter_scheduler]
available_filters`` (a multi-valued option: the existing lines stay), adds
``BuildSlotFilter`` to ``enabled_filters`` and mlaccel's weighers to
``weight_classes`` (starting from Nova's defaults when a key is unset).
It turns on Nova's versioned notifications, which the launcher's life-cycle
records are built from: ``[notifications] notification_format`` becomes
``versioned``, or ``both`` where unversioned ones were being sent, and
``[oslo_messaging_notifications] driver`` gains ``messagingv2`` unless a
messaging driver is there. It writes the state bus settings given to every
file edited. ``disable`` undoes the scheduler edits and the notification
edits that ``enable`` made (each is marked by a comment above it); the
state bus settings stay. Running either twice changes nothing. In
cinder.conf, ``--cinder-mirror-backend`` wraps a backend in the mirror-volume
driver (:mod:`mlaccel.cmd.cinder_config`).

Files are read as oslo.config reads them and edited in place (see
:mod:`mlaccel.inifile`). Bad input changes nothing: the command prints one
line on stderr and exits with status 2.
"""

import argparse
import os
import re
import sys
from urllib import parse

from mlaccel.cmd import cinder_config
from mlaccel import inifile
from mlaccel.statebus import keys
from mlaccel.statebus import url as bus_url

SCHEDULER_GROUP = 'filter_scheduler'
STATEBUS_GROUP = 'mlaccel_statebus'
MLACCEL_FILTERS = 'mlaccel.scheduler.filters.all_filters'
MLACCEL_WEIGHERS = 'mlaccel.scheduler.weights.all_weighers'
MLACCEL_ENABLED_FILTERS = ('BuildSlotFilter',)

NOTIFICATIONS_GROUP = 'notifications'
NOTIFIER_GROUP = 'oslo_messaging_notifications'
#: Nova's notification formats; ``unversioned`` is its default.
FORMATS = ('unversioned', 'versioned', 'both')
#: oslo.messaging drivers that put notifications on the message bus.
MESSAGING_DRIVERS = ('messagingv2', 'messaging')
ADDED_NOTE = 'Added by mlaccel-config enable; its disable removes it.'
SET_NOTE = 'Set by mlaccel-config enable (was: %s); its disable restores it.'
_SET_NOTE_RE = re.compile(r'^Set by mlaccel-config enable \(was: (\S+)\); '
                          r'its disable restores it\.$')

ConfigError = inifile.Error
_CLASS_RE = re.compile(r'^[A-Za-z_]\w*$')
_PATH_RE = re.compile(r'^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$')
_LIST_ITEMS = {'enabled_filters': (_CLASS_RE, 'a filter class name'),
               'weight_classes': (_PATH_RE, 'a dotted weigher path')}


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


def _edit_list(ini, name, change, unset_too=True):
    """Apply ``change`` to the items of a comma-separated list option."""
    values = ini.get(SCHEDULER_GROUP, name)
    if values is None:
        if not unset_too:
            return
        items = _nova_default(name)
    else:
        # oslo.config keeps the last of repeated single-valued options.
        items = [item.strip() for item in values[-1].split(',')
                 if item.strip()]
        pattern, what = _LIST_ITEMS[name]
        for item in items:
            if not pattern.match(item):
                hint = ' (oslo.config reads an indented line after an ' \
                    'option, even a comment, as part of its value)' \
                    if '\n' in item else ''
                raise ConfigError('%s: [%s] %s holds %r, not %s%s' % (
                    ini.path, SCHEDULER_GROUP, name, item, what, hint))
    new = change(items)
    if values is None or new != items:
        ini.set(SCHEDULER_GROUP, name, [','.join(new)])


def enable_scheduler(ini):
    """Enable mlaccel's filters and weighers in nova.conf."""
    filters = ini.get(SCHEDULER_GROUP, 'available_filters')
    if filters is None:
        filters = _nova_default('available_filters')
        for value in filters:
            ini.add(SCHEDULER_GROUP, 'available_filters', value)
    if MLACCEL_FILTERS not in filters:
        ini.add(SCHEDULER_GROUP, 'available_filters', MLACCEL_FILTERS)
    _edit_list(ini, 'enabled_filters', lambda items: items + [
        name for name in MLACCEL_ENABLED_FILTERS if name not in items])
    _edit_list(ini, 'weight_classes', lambda items: items + [
        path for path in [MLACCEL_WEIGHERS] if path not in items])


def disable_scheduler(ini):
    """Undo :func:`enable_scheduler`."""
    ini.remove(SCHEDULER_GROUP, 'available_filters', MLACCEL_FILTERS)
    _edit_list(ini, 'enabled_filters', lambda items: [
        name for name in items if name not in MLACCEL_ENABLED_FILTERS],
        unset_too=False)
    _edit_list(ini, 'weight_classes', lambda items: [
        path for path in items if path != MLACCEL_WEIGHERS],
        unset_too=False)


def _notification_format(ini):
    """The format Nova uses, read where oslo.config reads it."""
    for group in (NOTIFICATIONS_GROUP, 'DEFAULT'):  # the deprecated group
        values = ini.get(group, 'notification_format')
        if values is not None:
            if values[-1] not in FORMATS:
                raise ConfigError('%s: [%s] notification_format is %r, not '
                                  'one of %s' % (ini.path, group, values[-1],
                                                 ', '.join(FORMATS)))
            return values[-1]
    return 'unversioned'


def enable_notifications(ini):
    """Have Nova send the versioned notifications the launcher reads.

    Unversioned notifications stay on where any driver was sending them.
    """
    drivers = ini.get(NOTIFIER_GROUP, 'driver') or []
    sending = any(driver != 'noop' for driver in drivers)
    fmt = _notification_format(ini)
    if not set(drivers) & set(MESSAGING_DRIVERS):
        ini.add(NOTIFIER_GROUP, 'driver', 'messagingv2', note=ADDED_NOTE)
    if fmt == 'unversioned':
        was = ini.get(NOTIFICATIONS_GROUP, 'notification_format')
        ini.set(NOTIFICATIONS_GROUP, 'notification_format',
                ['both' if sending else 'versioned'],
                note=SET_NOTE % (was[-1] if was else 'unset'))


def disable_notifications(ini):
    """Undo what :func:`enable_notifications` changed, and only that."""
    ini.replace_noted(NOTIFIER_GROUP, 'driver', ADDED_NOTE, None)
    for note, value in ini.notes(NOTIFICATIONS_GROUP, 'notification_format'):
        match = _SET_NOTE_RE.match(note)
        if match is None:
            continue
        was = match.group(1)
        if value not in ('versioned', 'both'):
            was = value  # changed since: keep the operator's value
        ini.replace_noted(NOTIFICATIONS_GROUP, 'notification_format', note,
                          None if was == 'unset' else was)


def set_statebus(ini, args):
    """Write the ``[mlaccel_statebus]`` settings given on the command line."""
    for key, value in (
            ('backend_url', args.statebus_url),
            ('deployment_key_file', args.statebus_deployment_key_file),
            ('host_key_file', args.statebus_host_key_file)):
        if value is not None:
            # oslo.config substitutes $name in values: "$$" is a "$".
            ini.set(STATEBUS_GROUP, key, [value.replace('$', '$$')])


def _one_line(text):
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise argparse.ArgumentTypeError(
            'must be one line without spaces or control characters')
    if '\\' in text:
        raise argparse.ArgumentTypeError('must not contain a backslash')
    return text


def tooz_url(text):
    """An argparse type: a state bus URL, never echoed (a password)."""
    _one_line(text)
    try:
        url = parse.urlsplit(text)
        url.port
    except ValueError as exc:
        raise argparse.ArgumentTypeError('not a valid URL: %s' % exc)
    schemes = sorted(bus_url.known_schemes())
    if url.scheme not in schemes:
        raise argparse.ArgumentTypeError(
            'not a state bus URL: its scheme must be one of %s'
            % ', '.join(schemes))
    if url.scheme == 'file' and (url.netloc or not url.path.startswith('/')):
        raise argparse.ArgumentTypeError(
            'a file:// URL needs an absolute path (file:///var/lib/...)')
    return text


def _key_file(read):
    """An argparse type: the absolute path of a key file ``read`` accepts."""
    def key_file(text):
        _one_line(text)
        if not os.path.isabs(text):
            raise argparse.ArgumentTypeError('%s is not an absolute path'
                                             % text)
        try:
            read(text)
        except keys.KeyFileError as exc:
            raise argparse.ArgumentTypeError(str(exc))
        return text
    return key_file


class _ArgumentParser(argparse.ArgumentParser):
    """Usage errors in one line."""

    def error(self, message):
        self.exit(2, '%s: error: %s (see --help)\n' % (self.prog, message))


def _parser():
    parser = _ArgumentParser(
        prog='mlaccel-config',
        description='Enable or disable mlaccel in OpenStack service '
                    'configuration files. Idempotent.')
    sub = parser.add_subparsers(dest='action', required=True)
    enable = sub.add_parser('enable', help='enable mlaccel')
    enable.add_argument('--nova-conf', required=True,
                        help='nova.conf to edit (the scheduler\'s, and the '
                             'computes\' for notifications and host keys)')
    enable.add_argument('--cinder-conf',
                        help='cinder.conf to edit (state bus settings)')
    enable.add_argument('--cinder-mirror-backend', action='append',
                        default=[], type=_cinder_section,
                        metavar='SECTION',
                        help='backend section of --cinder-conf whose driver '
                             'the mirror-volume driver wraps (repeatable); '
                             'also enables GoldenImageWeigher')
    enable.add_argument('--statebus-url', type=tooz_url,
                        help='tooz URL of the state bus, written to '
                             '[mlaccel_statebus] backend_url')
    enable.add_argument('--statebus-deployment-key-file',
                        type=_key_file(keys.read_deployment_keys),
                        help='deployment key of the state bus ("mlaccel-'
                             'statebus keygen"), for the nodes that read '
                             'host reports (schedulers); written to '
                             '[mlaccel_statebus] deployment_key_file')
    enable.add_argument('--statebus-host-key-file',
                        type=_key_file(keys.read_host_keys),
                        help='this host\'s key ("mlaccel-statebus derive"), '
                             'for compute nodes; written to '
                             '[mlaccel_statebus] host_key_file')
    disable = sub.add_parser('disable', help='undo the scheduler and '
                                             'notification edits')
    disable.add_argument('--nova-conf', required=True,
                         help='nova.conf to edit')
    disable.add_argument('--cinder-conf',
                         help='cinder.conf whose mirror-volume edits to undo')
    return parser


def _cinder_section(text):
    try:
        return cinder_config.section_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _edit(args):
    """Read, edit and write every file; all or nothing is written."""
    # Every file is read and edited before any is written.
    nova = inifile.IniFile(args.nova_conf)
    files = [nova]
    cinder = None
    if args.cinder_conf:
        cinder = inifile.IniFile(args.cinder_conf)
        if cinder.real_path == nova.real_path:
            raise ConfigError('--nova-conf and --cinder-conf name the '
                              'same file')
        files.append(cinder)
    if args.action == 'enable':
        if args.cinder_mirror_backend and cinder is None:
            raise ConfigError('--cinder-mirror-backend needs --cinder-conf')
        enable_scheduler(nova)
        enable_notifications(nova)
        for ini in files:
            set_statebus(ini, args)
        if args.cinder_mirror_backend:
            cinder_config.enable_mirror(cinder, args.cinder_mirror_backend)
    else:
        disable_scheduler(nova)
        disable_notifications(nova)
        if cinder is not None:
            cinder_config.disable_mirror(cinder)
    pending = []
    try:
        for ini in files:
            pending.append(ini.prepare())
    except BaseException:
        for item in pending:
            if item is not None:
                item.abort()
        raise
    for ini, item in zip(files, pending):
        if item is not None:
            item.commit()
        print('%s: %s' % (ini.path, 'unchanged' if item is None
                          else 'updated'))


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        _edit(args)
    except ConfigError as exc:
        print('mlaccel-config: error: %s' % str(exc).replace('\n', '\\n'),
              file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
