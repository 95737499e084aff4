# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The order in which side-by-side measurements take turns.

Arms measured one after the other meet a machine another arm has just
warmed (or loaded); running them in a fixed order would hand that to the
same arm every time. Each round runs every arm once, in an order drawn
with a seed and never the order of the round before it.
"""

import random


def orders(arms, rounds, seed=0):
    """``rounds`` lists of ``arms``, each shuffled, none equal to the last.

    The same arms, rounds and seed always give the same orders.
    """
    arms = list(arms)
    # Arms all alike have one order only.
    several = any(arm != arms[0] for arm in arms)
    rng = random.Random(seed)
    drawn, previous = [], None
    for _ in range(rounds):
        order = list(arms)
        rng.shuffle(order)
        while several and order == previous:
            rng.shuffle(order)
        drawn.append(order)
        previous = order
    return drawn
