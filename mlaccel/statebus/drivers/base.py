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

"""The driver that knows no change, and what every driver answers."""

#: Seconds between two reads of every report, whatever the driver says.
FULL_READ_INTERVAL = 300.0


class Changes:
    """A reader's and a publisher's view of one group's changes.

    This base class knows no change: every refresh reads everything, and
    publishers announce nothing. Drivers override :meth:`read_changed`
    (and :meth:`announce` where the backend does not number writes).

    :param coord: a started tooz coordinator.
    :param group: the group's id (bytes).
    """

    def __init__(self, coord, group):
        self.coord = coord
        self.group = group
        # The member ids the reader holds, to tell when one left.
        self._held = set()

    def read_all(self):
        """``{member id: raw report or None}`` of every member.

        :raises tooz.coordination.GroupNotCreated: if there is no group.
        """
        members = self.coord.get_members_with_capabilities(self.group).get()
        self._held = set(members)
        return members

    def read_changed(self):
        """What changed since the last read, or ``None`` if unknown.

        ``{member id: raw or None}`` of the members changed (``None``: the
        member left); ``None`` when the driver cannot tell, and everything
        must be read again.
        """
        return None

    def _tally(self, changed, count):
        """``changed``, or ``None`` if the members' ``count`` disagrees.

        A group whose number of members is not what the reader holds with
        ``changed`` lost a member unseen (or gained one that did not
        announce itself), which only a full read tells.
        """
        for member, raw in changed.items():
            if raw is None:
                self._held.discard(member)
            else:
                self._held.add(member)
        return changed if count == len(self._held) else None

    def announce(self, member):
        """Tell readers that ``member`` wrote its report (publishers)."""
