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

"""Build times of a server from Nova's instance actions: the fallback.

The launcher takes a server's boundaries from Nova's versioned
notifications (:mod:`mlaccel.nova.notifications`) when it can listen to them;
instance actions are what every user can read otherwise, with two limits:

- the ``create`` action's ``start_time`` is when the API received the
  request (the request context's timestamp), not the end of scheduling, so
  it is never used as one. The compute's ``compute__do_build_and_run_instance``
  event starts when the compute begins the build, after the scheduler and the
  conductor are done: it stands in for the end of scheduling, and its
  successful ``finish_time`` for the server turning ACTIVE;
- Nova keeps these times in DATETIME columns, whole seconds on MariaDB and
  MySQL: a time whose fraction is zero is taken to be cut to the second
  (``precision`` 1.0), any other to the microsecond.

openstacksdk negotiates a microversion (2.51 or later) that lists the events
to every user. Nova writes the times in UTC without a zone.
"""

import datetime

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

CREATE = 'create'
BUILD_EVENT = 'compute__do_build_and_run_instance'
SCHEDULE_SUFFIX = 'schedule_instances'


def _datetime(value):
    when = datetime.datetime.fromisoformat(str(value).replace('Z', '+00:00'))
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when


def parse_time(value):
    """A Nova timestamp (ISO 8601, UTC unless it says otherwise) as UNIX."""
    if not value:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return _datetime(value).timestamp()


def precision(value):
    """Seconds of resolution of a Nova time: 1.0 when cut to the second."""
    if not value:
        return None
    if isinstance(value, (int, float)):
        return 1e-6
    return 1e-6 if _datetime(value).microsecond else 1.0


def stage_times(action):
    """Times found in one ``create`` action (a dict as Nova returns it).

    :returns: dict with ``requested`` (the API's request time),
        ``scheduled`` (a conductor ``*schedule_instances`` event's end, only
        on re-schedules and unshelve), ``build_started``, ``built`` (UNIX
        times or ``None``), ``build_result`` and ``precision``, the coarsest
        resolution among those times (1.0 or 1e-6).
    """
    times = {'requested': parse_time(action.get('start_time')),
             'scheduled': None, 'build_started': None, 'built': None,
             'build_result': None}
    raw = [action.get('start_time')]
    for event in action.get('events') or ():
        name = event.get('event') or ''
        if name.endswith(SCHEDULE_SUFFIX) and event.get('finish_time'):
            times['scheduled'] = parse_time(event['finish_time'])
            raw.append(event['finish_time'])
        elif name == BUILD_EVENT:
            times['build_started'] = parse_time(event.get('start_time'))
            times['build_result'] = event.get('result')
            raw.append(event.get('start_time'))
            if event.get('result') == 'Success':
                times['built'] = parse_time(event.get('finish_time'))
                raw.append(event.get('finish_time'))
    known = [precision(value) for value in raw if value]
    times['precision'] = max(known) if known else None
    return times


def create_action_times(conn, server_id):
    """Fetch the server's ``create`` action and return :func:`stage_times`.

    Returns ``None`` when the action cannot be read (policy, API version,
    the server is gone); the caller then keeps its own observations.
    """
    try:
        compute = conn.compute
        for summary in compute.server_actions(server_id):
            if summary.action != CREATE:
                continue
            action = compute.get_server_action(summary.request_id, server_id,
                                               ignore_missing=False)
            return stage_times({'start_time': action.start_time,
                                'events': action.events})
    except Exception as exc:
        LOG.warning('Cannot read the instance actions of server %s: %s',
                    server_id, exc)
    return None
