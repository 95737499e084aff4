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

"""How many warm members a pool keeps: Little's law on measured demand.

VMs arrive (are asked for) at a rate ``λ`` measured over a sliding window;
a used member is replaced after the refill lead time ``W`` (create to
warm). Keeping ``L = λ·W`` members warm covers the demand that arrives
while a refill is on its way; a margin absorbs bursts. The result is kept
between the pool's bounds.
"""

import math


def arrival_rate(arrivals, now, window):
    """VMs asked for per second over the last ``window`` seconds.

    ``arrivals`` is a sequence of ``(time, vm count)``.
    """
    if window <= 0:
        raise ValueError('window must be positive')
    return sum(n for t, n in arrivals if now - window < t <= now) / window


def prune(arrivals, now, window):
    """The arrivals still inside the window, oldest first."""
    return [[t, n] for t, n in sorted(arrivals) if now - window < t <= now]


def lead_time(previous, sample, weight=0.3):
    """Exponentially weighted refill lead time after a new ``sample``."""
    if previous is None:
        return sample
    return (1 - weight) * previous + weight * sample


def target_size(rate, lead, margin, min_size, max_size):
    """``ceil(rate × lead × (1 + margin))`` between the bounds."""
    if min_size < 0 or max_size < min_size:
        raise ValueError('bounds must satisfy 0 <= min <= max, got %r..%r'
                         % (min_size, max_size))
    wanted = math.ceil(rate * lead * (1 + margin) - 1e-9) if lead else 0
    return max(min_size, min(max_size, wanted))
