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

"""Bandwidth shared fairly among the transfers in flight: a fluid model.

Each transfer crosses one or more links (a host's network link, Glance's
aggregate bandwidth, a Cinder backend, a machine's cores). Its rate is its
share of its tightest link, each link divided equally among the transfers
crossing it; rates are recomputed whenever a transfer starts or ends.

A transfer may use a link at a cost per unit of its size: a volume copy
crosses the machine's cores at so many CPU-seconds a byte, and a cold
start is CPU-seconds of work on the cores alone. A link may also bound
what one transfer takes of it (``each``: a process runs on one core).
"""

#: Share of a transfer's size left below which it counts as done (float
#: rounding: a byte of a GB, a nanosecond of a CPU-second).
_DONE = 1e-9


class Link:
    """A bandwidth (bytes per second) shared by the transfers on it."""

    def __init__(self, bandwidth, each=None):
        if not bandwidth > 0:
            raise ValueError('bandwidth must be positive, got %r'
                             % (bandwidth,))
        if each is not None and not each > 0:
            raise ValueError('each must be positive, got %r' % (each,))
        self.bandwidth = float(bandwidth)
        self.each = float(each) if each is not None else None
        self.active = 0

    def share(self):
        """What each transfer crossing it gets of it now."""
        share = self.bandwidth / self.active
        return share if self.each is None else min(share, self.each)


class _Transfer:
    __slots__ = ('left', 'links', 'done', 'rate', 'close')

    def __init__(self, size, links, done):
        self.left = float(size)
        self.links = links
        self.done = done
        self.rate = 0.0
        self.close = _DONE * self.left


class Fluid:
    """The transfers of one :class:`simpy.Environment`."""

    def __init__(self, env):
        self.env = env
        self._transfers = []
        self._last = env.now
        self._generation = 0

    def transfer(self, size, links):
        """An event that fires when ``size`` has crossed ``links``.

        :param links: each a :class:`Link` (one of its units per unit of
            size) or ``(link, cost)``: ``cost`` of its units per unit.
        """
        done = self.env.event()
        self._advance()
        if size <= 0:
            done.succeed()
            return done
        links = tuple(link if isinstance(link, tuple) else (link, 1.0)
                      for link in links)
        self._transfers.append(_Transfer(size, links, done))
        for link, _cost in links:
            link.active += 1
        self._plan()
        return done

    def _advance(self):
        elapsed = self.env.now - self._last
        if elapsed > 0:
            for transfer in self._transfers:
                transfer.left -= transfer.rate * elapsed
        self._last = self.env.now

    def _plan(self):
        finished = [t for t in self._transfers if t.left <= t.close]
        if finished:
            self._transfers = [t for t in self._transfers
                               if t.left > t.close]
            for transfer in finished:
                for link, _cost in transfer.links:
                    link.active -= 1
                transfer.done.succeed()
        if not self._transfers:
            return
        for transfer in self._transfers:
            transfer.rate = min(link.share() / cost
                                for link, cost in transfer.links)
        wait = min(t.left / t.rate for t in self._transfers)
        self._generation += 1
        generation = self._generation
        timer = self.env.timeout(wait)
        timer.callbacks.append(lambda _event: self._wake(generation))

    def _wake(self, generation):
        if generation == self._generation:
            self._advance()
            self._plan()
