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

"""Learning tasks shipped with mlaccel and the hooks a task calls.

A task is a function ``main(args: dict) -> dict`` (JSON-able result). Under
mlaccel-taskd it runs in a forked child or a persistent worker; it calls
:func:`report_first_step` when its training loop takes its first step, which
marks the end of the buffering stage of the task's life.
"""

import threading
import time

_lock = threading.Lock()
_reporter = None
_first_step_at = None


def report_first_step():
    """Record that the training loop took its first step; return when.

    Only the first call of a task counts. Under taskd the time is sent to
    the daemon and appears as ``first_step_at`` in the task's status;
    elsewhere it is only remembered (see :func:`first_step_at`).
    """
    global _first_step_at
    with _lock:
        if _first_step_at is not None:
            return _first_step_at
        _first_step_at = time.time()
        reporter = _reporter
    if reporter is not None:
        reporter({'event': 'first_step', 'at': _first_step_at})
    return _first_step_at


def first_step_at():
    """UNIX time of the current task's first step, or ``None``."""
    return _first_step_at


def bind_reporter(reporter):
    """Start a new task whose events go to ``reporter(dict)`` (or nowhere).

    Called by the task runner of taskd before each task.
    """
    global _reporter, _first_step_at
    with _lock:
        _reporter = reporter
        _first_step_at = None
