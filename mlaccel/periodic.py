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

"""One way to run a periodic loop in mlaccel's services.

:class:`Periodic` calls a function every ``interval`` seconds on its own
daemon thread.

Why not ``futurist.periodics.PeriodicWorker`` or oslo.service's looping
calls: a periodic's spacing is fixed when it is decorated, so intervals of
mutable options would not be re-read, and neither can run a pass early
(the host reporter and the Cinder publisher are woken when something
changed); oslo.service's looping calls run on eventlet greenthreads by
default and oslo.service is no requirement of mlaccel. What both offer
and mlaccel needs (a thread per loop, log-and-go-on, a clean stop) is
these few lines. The thread is a daemon ``threading`` thread (native in
Nova's and Cinder's native-thread mode, as the loops it replaced were):
futurist's executors join their workers at exit, which would keep a
process whose loop was not stopped (``mlaccel-statebus publish --once``)
from exiting. This module imports nothing from mlaccel's service
packages.
"""

import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class Periodic:
    """Call ``func()`` every ``interval`` seconds until :meth:`stop`.

    :param name: the thread's name, and the loop's in log messages.
    :param interval: seconds between the end of a pass and the next one;
        a callable is called before each wait (for mutable options).
    :param func: the pass; what it raises is given to ``on_error`` and
        the loop goes on.
    :param initial_delay: seconds (or a callable) before the first pass.
    :param wakeable: whether :meth:`wake` may cut a wait short.
    :param stop_event: a ``threading.Event`` to stop on (default: own);
        setting it stops the loop as :meth:`stop` does, without joining.
        Not with ``wakeable``: a wakeable loop waits on its wake event, so
        it stops by :meth:`stop`, which sets both.
    :param on_error: called with the exception (default: logged).
    """

    def __init__(self, name, interval, func, *, initial_delay=0.0,
                 wakeable=False, stop_event=None, on_error=None):
        if wakeable and stop_event is not None:
            raise ValueError('%s: a wakeable loop stops by stop(), not by '
                             'an event of its owner' % name)
        self.name = name
        self._interval = interval
        self._initial_delay = initial_delay
        self._func = func
        self._on_error = on_error or self._log
        self.stopping = stop_event if stop_event is not None \
            else threading.Event()
        self._wake = threading.Event() if wakeable else None
        self._done = threading.Condition()
        self._started = None
        self._thread = None
        #: Passes finished, failed or not.
        self.runs = 0

    @staticmethod
    def _seconds(value):
        return value() if callable(value) else value

    @property
    def interval(self):
        """The current interval in seconds."""
        return self._seconds(self._interval)

    @property
    def running(self):
        """Whether the loop's thread is running (or about to)."""
        return self._started is not None and self._started.is_alive()

    def _log(self, exc):
        LOG.error('%s: a pass failed; going on: %s', self.name, exc,
                  exc_info=exc)

    def start(self):
        """Start the loop on its own thread unless it runs already."""
        with self._done:
            if self.running:
                return
            self.stopping.clear()
            self._started = threading.Thread(target=self.run, daemon=True,
                                             name=self.name)
            self._started.start()

    def run(self):
        """Run the loop in the calling thread until :meth:`stop`."""
        self._thread = threading.current_thread()
        try:
            if self._wait(self._seconds(self._initial_delay)):
                return
            while not self.stopping.is_set():
                if self._wake is not None:
                    self._wake.clear()
                self.run_once()
                if self._wait(self.interval):
                    return
        finally:
            self._thread = None

    def _wait(self, seconds):
        """Wait ``seconds`` (or until woken); whether to stop."""
        if seconds and seconds > 0:
            if self._wake is not None:
                self._wake.wait(seconds)
            else:
                self.stopping.wait(seconds)
        return self.stopping.is_set()

    def run_once(self):
        """One pass now, in the calling thread; never raises."""
        try:
            self._func()
        except Exception as exc:
            self._on_error(exc)
        finally:
            with self._done:
                self.runs += 1
                self._done.notify_all()

    def wait_for_runs(self, count=1, timeout=None):
        """Whether ``count`` more passes finish within ``timeout``.

        More than have finished when it is called: a pass that ended just
        before does not count (see :meth:`wait_until_runs`).
        """
        with self._done:
            return self.wait_until_runs(self.runs + count, timeout)

    def wait_until_runs(self, total, timeout=None):
        """Whether ``total`` passes in all have finished within ``timeout``."""
        with self._done:
            return self._done.wait_for(lambda: self.runs >= total, timeout)

    def wake(self):
        """End the current wait: the next pass starts now."""
        if self._wake is None:
            raise RuntimeError('%s is not wakeable' % self.name)
        self._wake.set()

    def stop(self, timeout=None):
        """Stop the loop; wait up to ``timeout`` seconds for its pass.

        Returns whether the loop has ended. Called from the loop's own
        thread, it does not wait.
        """
        self.stopping.set()
        if self._wake is not None:
            self._wake.set()
        thread = self._started
        if thread is None:
            return True
        if thread is not threading.current_thread():
            thread.join(timeout)
        return not thread.is_alive()
