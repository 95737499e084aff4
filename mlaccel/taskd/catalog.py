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

"""Which tasks a daemon runs: registered entry points, and what is allowed.

A task is registered as an entry point in the ``mlaccel.tasks`` namespace
(the stevedore convention), e.g. ``clip = mlaccel.tasks.clip:main``, and
is submitted by its name (``"clip"``) or by the ``module:function`` it
names. Any other ``module:function`` runs only where the operator's
``allowed_tasks`` patterns allow it: left to a client, ``os:system`` would
be a remote shell.
"""

import fnmatch
import importlib.metadata
import re

NAMESPACE = 'mlaccel.tasks'
_PATTERN = re.compile(r'^[A-Za-z_*][\w.*]*:[A-Za-z_*][\w*]*$|^\*$')


def registered():
    """``{name: "module:function"}`` of the tasks installed on this host."""
    return {ep.name: ep.value
            for ep in importlib.metadata.entry_points(group=NAMESPACE)}


class Catalog:
    """The registered tasks plus the operator's ``allowed`` patterns.

    A pattern is ``"module:function"``, with ``*`` matching anything
    (``"mypkg.tasks:*"``, or ``"*"`` for any function of any module).
    Raises ``ValueError`` for a pattern of another form.
    """

    def __init__(self, allowed=(), tasks=None):
        for pattern in allowed:
            if not _PATTERN.match(pattern):
                raise ValueError('allowed_tasks entry %r is not '
                                 '"module:function" (with * as wildcard) '
                                 'or "*"' % pattern)
        self.allowed = tuple(allowed)
        self.tasks = registered() if tasks is None else dict(tasks)
        self._targets = set(self.tasks.values())

    def target(self, entry):
        """The ``module:function`` to call for a submitted ``entry``.

        Raises ``LookupError`` for an unknown name, ``PermissionError``
        for a ``module:function`` that is neither registered nor allowed.
        """
        if ':' not in entry:
            try:
                return self.tasks[entry]
            except KeyError:
                raise LookupError('no task named %r is registered; '
                                  'registered: %s' % (
                                      entry, ', '.join(sorted(self.tasks))
                                      or 'none')) from None
        if entry in self._targets or any(
                fnmatch.fnmatchcase(entry, pattern)
                for pattern in self.allowed):
            return entry
        raise PermissionError('%s is not a registered task and the '
                              'daemon\'s allowed_tasks does not allow it'
                              % entry)
