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

"""Redis: publishers announce their writes in a change index.

Beside tooz's group (a hash of member -> report), three keys of the
group: a counter, a sorted set of members scored by the counter's value
at their last write, and an epoch, a random token set whenever the
counter is created. A publisher's :meth:`RedisChanges.announce` runs
one Lua script, so the counter's increment and the member's new score are
one step: a reader that sees the counter at N sees every announcement
numbered up to N. A refresh reads the counter, the epoch, the members
scored above what it saw last and the group's size, in one transaction,
then only those members' reports. A counter below what it saw, or another
epoch, is a Redis that lost or replaced its data, and a size other than
the reader's count is a member gone: the reader reads everything again.

A publisher of an older mlaccel announces nothing: while any member of the
group has no score, every refresh reads everything, as before.
"""

import uuid

from oslo_log import log as logging
from tooz import coordination

from mlaccel.statebus.drivers import base

LOG = logging.getLogger(__name__)

_ANNOUNCE = """
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[3], ARGV[2])
end
local version = redis.call('incr', KEYS[1])
redis.call('zadd', KEYS[2], version, ARGV[1])
return version
"""


def check(coord):
    """Raise at once if ``coord``'s Redis cannot be reached or refuses it.

    Call it before ``coord.start()``. tooz retries a refused password
    and a refused connection alike, 15 times, each after redis-py's own
    retries: about a minute before a client that can never start fails,
    while a reader, a publisher or ``mlaccel-statebus show`` waits. This
    asks once, with a client made as tooz makes its own and no retry;
    whoever starts the client tries again in its next round. Any other
    answer (a ``NOPERM`` of an ACL user, say) is left to tooz's start.

    :raises tooz.coordination.ToozConnectionError: with redis-py's error
        as its cause.
    """
    # redis-py is there when tooz made a Redis client (mlaccel[redis]).
    import redis
    from redis import backoff
    from redis import retry

    client = type(coord)._make_client(coord._parsed_url, coord._options,
                                      coord.timeout)
    client.set_retry(retry.Retry(backoff.NoBackoff(), 0))
    try:
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise coordination.ToozConnectionError(str(exc)) from exc
    except redis.RedisError:
        pass
    finally:
        client.close()


class RedisChanges(base.Changes):
    """The change index of one group on tooz's Redis driver.

    It reaches into the driver for its client, key names and encoding
    (tooz has no public API for either); a tooz without them fails the
    refresh, which the reader reports.
    """

    def __init__(self, coord, group):
        super().__init__(coord, group)
        prefix = coord._namespace + b'_mlaccel_'
        self._keys = [prefix + b'version:' + group,
                      prefix + b'changes:' + group,
                      prefix + b'epoch:' + group]
        self._script = None
        # (epoch, counter) as of the last read; None: read everything.
        self._seen = None
        self.unannounced = 0

    def announce(self, member, pipe=None):
        """Announce ``member``'s write.

        Queued on ``pipe`` if one is given (a tool writing for many
        members at once).
        """
        if self._script is None:
            self._script = self.coord._client.register_script(_ANNOUNCE)
        self._script(keys=self._keys, args=[member, uuid.uuid4().hex],
                     client=pipe)

    def _mark(self, pipe):
        """Queue the reads of the counter and the epoch on ``pipe``."""
        pipe.get(self._keys[0])
        pipe.get(self._keys[2])

    def read_all(self):
        client = self.coord._client
        pipe = client.pipeline(transaction=True)
        self._mark(pipe)
        version, epoch = pipe.execute()
        members = super().read_all()
        # A member that never announced would change unseen.
        pipe = client.pipeline(transaction=False)
        for member in members:
            pipe.zscore(self._keys[1], member)
        unannounced = sum(score is None for score in pipe.execute())
        if unannounced and not self.unannounced:
            LOG.info('%d members of state bus group %s announce no changes '
                     '(an older publisher, or one joining now); every '
                     'refresh reads every report while they do.',
                     unannounced, self.group.decode(errors='replace'))
        self.unannounced = unannounced
        self._seen = None if unannounced else (epoch, int(version or 0))
        return members

    def read_changed(self):
        if self._seen is None:
            return None
        client = self.coord._client
        pipe = client.pipeline(transaction=True)
        self._mark(pipe)
        pipe.zrangebyscore(self._keys[1], '(%d' % self._seen[1], '+inf')
        group_key = self.coord._encode_group_id(self.group)
        pipe.hlen(group_key)
        version, epoch, members, size = pipe.execute()
        version = int(version or 0)
        if epoch != self._seen[0] or version < self._seen[1]:
            self._seen = None
            return None
        self._seen = (epoch, version)
        raws = client.hmget(group_key, members) if members else ()
        # The hash holds tooz's mark of the group's existence beside them.
        return self._tally({
            member: None if raw is None else self.coord._loads(raw)
            for member, raw in zip(members, raws)}, size - 1)
