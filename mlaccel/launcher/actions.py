"""Scheduling and creation times of a server from Nova's instance actions.

For a new server Nova records one ``create`` action. The conductor starts it
right after the scheduler has picked a host (and the instance has been
written to its cell), so its ``start_time`` ends the scheduling stage. The
compute records ``compute__do_build_and_run_instance`` around the build; its
``finish_time`` is when the guest was spawned and the VM turned ACTIVE. A
``*schedule_instances`` event, when present (re-schedules, unshelve), is
used for the scheduling end instead. openstacksdk negotiates a microversion
(2.51 or later) that lists the events to every user. Nova writes the times
in UTC without a zone; databases that drop fractions of a second make them
coarse, which is why the launcher clamps them between its own observations.
"""

import datetime

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

CREATE = 'create'
BUILD_EVENT = 'compute__do_build_and_run_instance'
SCHEDULE_SUFFIX = 'schedule_instances'


def parse_time(value):
    """A Nova timestamp (ISO 8601, UTC unless it says otherwise) as UNIX."""
    if not value:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    when = datetime.datetime.fromisoformat(str(value).replace('Z', '+00:00'))
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def stage_times(action):
    """Times found in one ``create`` action (a dict as Nova returns it).

    :returns: dict with ``scheduled``, ``build_started``, ``built`` (UNIX
        times or ``None``) and ``build_result``.
    """
    times = {'scheduled': parse_time(action.get('start_time')),
             'build_started': None, 'built': None, 'build_result': None}
    for event in action.get('events') or ():
        name = event.get('event') or ''
        if name.endswith(SCHEDULE_SUFFIX) and event.get('finish_time'):
            times['scheduled'] = parse_time(event['finish_time'])
        elif name == BUILD_EVENT:
            times['build_started'] = parse_time(event.get('start_time'))
            times['build_result'] = event.get('result')
            if event.get('result') == 'Success':
                times['built'] = parse_time(event.get('finish_time'))
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
