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
aggregate bandwidth, a Cinder backend). Its rate is its share of its
tightest link, each link divided equally among the transfers crossing it;
rates are recomputed whenever a transfer starts or ends.
"""

#: Bytes left below which a transfer counts as done (float rounding).
_DONE = 1.0


class Link:
    """A bandwidth (bytes per second) shared by the transfers on it."""

    def __init__(self, bandwidth):
        if not bandwidth > 0:
            raise ValueError('bandwidth must be positive, got %r'
                             % (bandwidth,))
        self.bandwidth = float(bandwidth)
        self.active = 0


class _Transfer:
    __slots__ = ('left', 'links', 'done', 'rate')

    def __init__(self, size, links, done):
        self.left = float(size)
        self.links = links
        self.done = done
        self.rate = 0.0


class Fluid:
    """The transfers of one :class:`simpy.Environment`."""

    def __init__(self, env):
        self.env = env
        self._transfers = []
        self._last = env.now
        self._generation = 0

    def transfer(self, size, links):
        """An event that fires when ``size`` bytes have crossed ``links``."""
        done = self.env.event()
        self._advance()
        if size <= 0:
            done.succeed()
            return done
        self._transfers.append(_Transfer(size, tuple(links), done))
        for link in links:
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
        finished = [t for t in self._transfers if t.left <= _DONE]
        if finished:
            self._transfers = [t for t in self._transfers if t.left > _DONE]
            for transfer in finished:
                for link in transfer.links:
                    link.active -= 1
                transfer.done.succeed()
        if not self._transfers:
            return
        for transfer in self._transfers:
            transfer.rate = min(link.bandwidth / link.active
                                for link in transfer.links)
        wait = min(t.left / t.rate for t in self._transfers)
        self._generation += 1
        generation = self._generation
        timer = self.env.timeout(wait)
        timer.callbacks.append(lambda _event: self._wake(generation))

    def _wake(self, generation):
        if generation == self._generation:
            self._advance()
            self._plan()
