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

"""The cinder.conf edits of ``mlaccel-config`` (:mod:`mlaccel.cmd.config`).

``enable --cinder-mirror-backend SECTION`` wraps that backend's driver in
the mirror-volume driver: ``volume_driver`` becomes
``mlaccel.cinder.driver.MirrorVolumeDriver`` and the driver it was moves to
``mlaccel_backend_driver``; ``GoldenImageWeigher`` joins
``scheduler_default_weighers`` (from Cinder's default, ``CapacityWeigher``,
when unset). ``disable --cinder-conf`` undoes both. The internal tenant
(``cinder_internal_tenant_project_id``, ``_user_id``) is the deployment's
to set: without it the driver serves nothing from its cache.
"""

import re

from mlaccel import inifile

MIRROR = 'mlaccel.cinder.driver.MirrorVolumeDriver'
WEIGHER = 'GoldenImageWeigher'
CINDER_DEFAULT_WEIGHERS = ['CapacityWeigher']
WRAP_NOTE = ('Set by mlaccel-config enable (the driver it wraps is '
             'mlaccel_backend_driver); its disable restores it.')
ADDED_NOTE = 'Added by mlaccel-config enable; its disable removes it.'
_SECTION_RE = re.compile(r'^[A-Za-z0-9_.-]+$')
_NAME_RE = re.compile(r'^[A-Za-z_]\w*$')


def section_name(text):
    """An argparse type: a backend section name."""
    if not _SECTION_RE.match(text) or text == 'DEFAULT':
        raise ValueError('%r is not a backend section name' % text)
    return text


def enable_mirror(ini, sections):
    """Wrap the drivers of ``sections`` and add the weigher."""
    for section in sections:
        drivers = ini.get(section, 'volume_driver')
        if not drivers:
            raise inifile.Error('%s: [%s] has no volume_driver for the '
                                'mirror-volume driver to wrap'
                                % (ini.path, section))
        if drivers[-1] == MIRROR:
            if not ini.get(section, 'mlaccel_backend_driver'):
                raise inifile.Error(
                    '%s: [%s] volume_driver is the mirror-volume driver but '
                    'mlaccel_backend_driver is not set'
                    % (ini.path, section))
            continue
        ini.set(section, 'mlaccel_backend_driver', [drivers[-1]])
        ini.set(section, 'volume_driver', [MIRROR], note=WRAP_NOTE)
    weighers = _weighers(ini)
    if WEIGHER not in weighers:
        ini.set('DEFAULT', 'scheduler_default_weighers',
                [','.join(weighers + [WEIGHER])], note=ADDED_NOTE)


def disable_mirror(ini):
    """Undo :func:`enable_mirror` in every enabled backend."""
    backends = ini.get('DEFAULT', 'enabled_backends') or ['']
    for section in [s.strip() for s in backends[-1].split(',') if s.strip()]:
        if WRAP_NOTE not in [n for n, _v in ini.notes(section,
                                                      'volume_driver')]:
            continue
        wrapped = ini.get(section, 'mlaccel_backend_driver')
        if not wrapped:
            raise inifile.Error('%s: [%s] mlaccel_backend_driver is gone; '
                                'cannot restore volume_driver'
                                % (ini.path, section))
        ini.replace_noted(section, 'volume_driver', WRAP_NOTE, wrapped[-1])
        ini.remove(section, 'mlaccel_backend_driver', wrapped[-1])
    weighers = ini.get('DEFAULT', 'scheduler_default_weighers')
    if weighers and WEIGHER in _weighers(ini):
        rest = [w for w in _weighers(ini) if w != WEIGHER]
        ini.replace_noted('DEFAULT', 'scheduler_default_weighers',
                          ADDED_NOTE, ','.join(rest) if rest else None)


def _weighers(ini):
    values = ini.get('DEFAULT', 'scheduler_default_weighers')
    if values is None:
        return list(CINDER_DEFAULT_WEIGHERS)
    items = [v.strip() for v in values[-1].split(',') if v.strip()]
    for item in items:
        if not _NAME_RE.match(item):
            raise inifile.Error('%s: [DEFAULT] scheduler_default_weighers '
                                'holds %r, not a weigher name'
                                % (ini.path, item))
    return items
