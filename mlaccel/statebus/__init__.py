"""The state bus: host reports carried over a tooz coordination backend.

Agents publish (:mod:`mlaccel.statebus.publisher`); the scheduler plugins
read every host's report from an in-memory cache that a background thread
refreshes (:mod:`mlaccel.statebus.reader`).
"""

from tooz import coordination


def coordinator(conf, member_id):
    """Return a tooz coordinator for the configured bus, not yet started."""
    return coordination.get_coordinator(
        conf.mlaccel_statebus.backend_url,
        member_id.encode() if isinstance(member_id, str) else member_id)


def group_id(conf):
    return conf.mlaccel_statebus.group.encode()
