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

"""Run one call per key at a time; concurrent callers share its outcome.

Plain ``threading`` primitives: correct on native threads and under eventlet
monkey patching (where they become green).
"""

import threading


class FlightTimeout(Exception):
    """The call in flight did not finish within the wait."""


class _Call:
    def __init__(self):
        self.done = threading.Event()
        self.result = None
        self.error = None
        self.joined = 0


class SingleFlight:
    def __init__(self):
        self._lock = threading.Lock()
        self._calls = {}

    def in_flight(self, key):
        with self._lock:
            return key in self._calls

    def joined(self, key):
        """How many callers wait on the call in flight for ``key``."""
        with self._lock:
            call = self._calls.get(key)
            return call.joined if call else 0

    def do(self, key, fn, timeout=None):
        """Run ``fn()`` unless a call for ``key`` is in flight; then wait.

        :returns: ``(result, leader)``; ``leader`` is True for the caller
            that ran ``fn``.
        :raises: what ``fn`` raised, in the leader and in every waiter.
        :raises FlightTimeout: a waiter waited ``timeout`` seconds in vain.
        """
        with self._lock:
            call = self._calls.get(key)
            leader = call is None
            if leader:
                call = self._calls[key] = _Call()
            else:
                call.joined += 1
        if not leader:
            if not call.done.wait(timeout):
                raise FlightTimeout('still in flight after %s s' % timeout)
            if call.error is not None:
                raise call.error
            return call.result, False
        try:
            call.result = fn()
        except BaseException as e:
            call.error = e
            raise
        finally:
            with self._lock:
                del self._calls[key]
            call.done.set()
        return call.result, True
