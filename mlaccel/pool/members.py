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

"""Pool members: made through the launcher's own path, checked, deleted.

A member is an ordinary server of the project, created the way
``mlaccel launch`` creates a task's VM (by a
:class:`mlaccel.launcher.provisioner.Provisioner`: the same user-data, a
token and TLS identity of its own, the signed readiness push), but kept
after its daemon is warm. Its name, ``mlaccel_pool_<pool key>-<launch
id>-0``, tags it as a member of that pool; nothing secret is in its name or
metadata.
"""

from oslo_log import log as logging

from mlaccel.launcher import provisioner
from mlaccel.pool import store as pool_store
from mlaccel.taskd import client

LOG = logging.getLogger(__name__)


def name_prefix(key):
    """First part of every member's name in pool ``key``."""
    return 'mlaccel_pool_%s' % key


def name_filter(key):
    """Nova's ``name`` regular expression matching the pool's members."""
    return '^%s-' % name_prefix(key)


def build(conn, spec, *, listener, conf=None, timeout=600.0, **options):
    """Create one member of pool ``spec`` and wait until its daemon is warm.

    Returns the member's record (see :mod:`mlaccel.pool.store`) with its
    ``lead_time_s`` (create request to readiness). Raises
    :class:`mlaccel.launcher.provisioner.LaunchError` (or the cloud's
    error) after deleting whatever it created.
    """
    made = provisioner.Provisioner(
        conn, 1, timeout=timeout, network=spec.networks, listener=listener,
        conf=conf, boot_volume_gb=spec.boot_volume_gb,
        name_prefix=name_prefix(spec.key), preload=list(spec.preload),
        taskd_port=spec.taskd_port, **options)
    try:
        made.start()
        made.create(spec.image_id, spec.flavor_id, spec.server_group_id)
        made.wait_ready()
    except BaseException:
        made.close()
        raise
    made.close(delete=False)
    vm = made.vms[0]
    ready = vm.ready
    return {'server_id': vm.server_id, 'name': vm.name,
            'launch_id': made.launch_id, 'token': vm.token,
            'cert_pem': vm.identity.cert_pem, 'address': ready.address,
            'preloaded': list(ready.preloaded), 'pid': ready.pid,
            'state': pool_store.IDLE, 'requested_at': vm.requested,
            'ready_at': ready.received_at, 'idle_since': ready.received_at,
            'tasks': 0, 'holder': None, 'claimed_at': None,
            'claim_deadline': None, 'health_failures': 0,
            'lead_time_s': ready.received_at - vm.requested}


def connect(member, token=None, timeout=10.0):
    """A client of the member's daemon: TLS pinned to its certificate."""
    return client.TaskdClient(member['address'],
                              token=token or member['token'],
                              timeout=timeout,
                              pinned_cert_pem=member['cert_pem'])


def idle_health(member, token=None, timeout=10.0):
    """Why the member's daemon cannot take a task, or ``None`` if it can.

    It must answer over its pinned TLS with its token, be ``ready`` (not
    draining) and run no task and no leftover process of one.
    """
    try:
        with connect(member, token, timeout) as conn:
            health = conn.health()
    except (OSError, ValueError, client.TaskdError) as exc:
        return 'no answer: %s' % exc
    if health.get('state') != 'ready':
        return 'daemon is %s' % health.get('state')
    busy = {state: n for state, n in (health.get('tasks') or {}).items()
            if state in ('queued', 'running') and n}
    if busy:
        return 'tasks still running: %s' % busy
    return None


def delete(conn, server_id):
    """Ask Nova to delete a member; False (logged) if the call failed."""
    try:
        conn.compute.delete_server(server_id, ignore_missing=True)
        return True
    except Exception as exc:
        LOG.warning('Deleting pool member %s failed: %s', server_id, exc)
        return False
