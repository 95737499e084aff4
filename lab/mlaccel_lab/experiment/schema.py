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

"""JSON schemas of the experiment's input files, and one-line errors.

A workload file (YAML or JSON) gives a workload's *shape*
(:data:`WORKLOAD`); the production file (:data:`PRODUCTION`) gives the
stated parameters of the simulator's run at scale; a calibration
(:data:`CALIBRATION`) the stage costs the simulator uses. :func:`load`
reads and checks any of them and raises :class:`InvalidFile` whose message
is one line naming the file, where in it, and what is wrong.
"""

import os

import jsonschema
import yaml

_POSITIVE = {'type': 'number', 'exclusiveMinimum': 0}
_NONNEG = {'type': 'number', 'minimum': 0}
_COUNT = {'type': 'integer', 'minimum': 1}

WORKLOAD = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['version', 'seed', 'images', 'task'],
    # Either a stream or tasks and arrivals (checked by the workload's
    # loader, with a message that says so).
    'properties': {
        'version': {'const': 1},
        'seed': {'type': 'integer', 'minimum': 0},
        'images': {
            'type': 'array', 'minItems': 1,
            'items': {
                'type': 'object', 'additionalProperties': False,
                'required': ['name', 'size_mib'],
                'properties': {
                    'name': {'type': 'string',
                             'pattern': '^[A-Za-z0-9][A-Za-z0-9_.-]*$'},
                    'size_mib': _COUNT,
                    'hot': {'type': 'boolean'},
                    'weight': _POSITIVE}}},
        'tasks': {
            'type': 'object', 'additionalProperties': False,
            'required': ['count', 'vms'],
            'properties': {
                'count': _COUNT,
                'vms': {'type': 'object', 'additionalProperties': False,
                        'required': ['min', 'max'],
                        'properties': {'min': _COUNT, 'max': _COUNT}},
                'boot_from_volume': {'type': 'number', 'minimum': 0,
                                     'maximum': 1}}},
        'arrivals': {
            'type': 'object', 'additionalProperties': False,
            'required': ['duration'],
            'properties': {
                'duration': _NONNEG,
                'bursts': {
                    'type': 'array',
                    'items': {'type': 'object', 'additionalProperties': False,
                              'required': ['size'],
                              'properties': {'size': _COUNT,
                                             'spread': _NONNEG}}}}},
        'stream': {
            'type': 'object', 'additionalProperties': False,
            'required': ['tasks', 'time_scale', 'max_vms'],
            'properties': {
                'tasks': _COUNT,
                'time_scale': _POSITIVE,
                'max_vms': _COUNT,
                'zipf_exponent': _NONNEG,
                'boot_from_volume': {'type': 'number', 'minimum': 0,
                                     'maximum': 1}}},
        'task': {
            'type': 'object', 'additionalProperties': False,
            'required': ['entry', 'steps'],
            'properties': {
                'entry': {'type': 'string', 'minLength': 1},
                'steps': _COUNT,
                'step_seconds': _POSITIVE,
                'device_ms': _NONNEG,
                'threads': _COUNT}},
    },
}

_STAGE_COSTS = {
    'type': 'object', 'additionalProperties': False,
    'properties': {name: _NONNEG for name in (
        'schedule_seconds', 'build_seconds', 'guest_boot_seconds',
        'cold_start_seconds')},
}

PRODUCTION = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['version', 'hosts', 'workload'],
    'properties': {
        'version': {'const': 1},
        'hosts': _COUNT,
        'host_slots': _COUNT,
        'scheduler_workers': _COUNT,
        'link_gbps': _POSITIVE,
        'glance_gbps': _POSITIVE,
        'volume_backends': _COUNT,
        'volume_copy_gbps': _POSITIVE,
        'stage_costs': _STAGE_COSTS,
        # The pool manager's options ([mlaccel_pool] name: value).
        'pool_options': {
            'type': 'object', 'additionalProperties': False,
            'properties': {
                'budget_members': {'type': 'integer', 'minimum': 0},
                'budget_idle_vm_hours': _NONNEG,
                'learn_max_size': _COUNT,
                'interval': _POSITIVE}},
        # How many of the trace's flavors the tasks use.
        'flavors': _COUNT,
        'workload': WORKLOAD,
    },
}

#: Seconds (or bytes per second) fields of a calibration, all required.
CALIBRATION_COSTS = (
    'build_seconds', 'download_bandwidth', 'volume_copy_bandwidth',
    'clone_seconds', 'guest_boot_seconds', 'cold_start_seconds',
    'preload_seconds', 'warm_start_seconds', 'step_seconds')
#: Optional integer fields of a calibration.
CALIBRATION_COUNTS = (
    'host_slots', 'build_limit', 'pacing_limit', 'volume_backends',
    'scheduler_workers', 'pool_max')

CALIBRATION = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['version', 'schedule_seconds', 'hosts']
    + list(CALIBRATION_COSTS),
    'properties': dict(
        {name: _NONNEG for name in CALIBRATION_COSTS},
        **{name: _COUNT for name in CALIBRATION_COUNTS},
        version={'const': 1},
        schedule_seconds={
            'type': 'object', 'additionalProperties': False,
            'required': ['stock', 'plugins'],
            'properties': {'stock': _NONNEG, 'plugins': _NONNEG}},
        waiting_seconds={
            'type': 'object', 'additionalProperties': False,
            'properties': {'cold': _NONNEG, 'launcher': _NONNEG}},
        cpu_cores=_POSITIVE,
        copy_cpu_seconds_per_gib=_NONNEG,
        fill_bandwidth=_POSITIVE,
        fill_cpu_seconds_per_gib=_NONNEG,
        download_bandwidth=_POSITIVE,
        volume_copy_bandwidth=_POSITIVE,
        glance_bandwidth=_POSITIVE,
        hosts=_COUNT,
        pool_interval=_POSITIVE,
        pool_window=_POSITIVE,
        pool_margin=_NONNEG,
        sources={'type': 'object'}),
}


class InvalidFile(ValueError):
    """An input file that cannot be used; the message is one line."""


def _where(error):
    path = '/'.join(str(part) for part in error.absolute_path)
    return path or '(top level)'


def check(data, schema, name):
    """Raise :class:`InvalidFile` unless ``data`` matches ``schema``.

    The message names ``name``, the path of the first (deepest) error and
    what is wrong, on one line.
    """
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        raise InvalidFile('%s: %s: %s' % (
            name, _where(error), ' '.join(error.message.split())[:300]))
    return data


def read(path):
    """The data of a YAML or JSON file; :class:`InvalidFile` if unreadable.

    YAML is a superset of JSON, so one parser reads both.
    """
    try:
        with open(path, encoding='utf-8') as stream:
            return yaml.safe_load(stream)
    except OSError as exc:
        raise InvalidFile('%s: cannot read: %s' % (path, exc.strerror))
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = 'line %d' % (mark.line + 1) if mark else 'parse error'
        raise InvalidFile('%s: %s: not YAML or JSON: %s' % (
            path, where, getattr(exc, 'problem', None) or exc))


def load(path, schema):
    """Read ``path`` and check it against ``schema``."""
    return check(read(path), schema, os.path.basename(path) or path)


def dump(data, path, compact=False):
    """Write ``data`` as JSON to ``path``, atomically.

    Indented unless ``compact``.
    """
    from mlaccel.launcher import record
    record.write_json(data, path, compact)
