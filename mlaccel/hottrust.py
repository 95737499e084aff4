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

"""Whose word makes an image hot: the rule the agent and the mirror share.

Every owner of an image can set its properties, and any project can boot a
shared or community image, so neither a property nor demand alone may make
every compute node (or every Cinder backend) fetch an image. A property
counts only on images of trusted owners (the operator's projects); demand
counts on those and on public images, which only an admin can publish.
:class:`Budget` caps the bytes hot images take, per image and per owner.
"""


def trusted(owner, owners):
    """Whether an image of ``owner`` may be marked hot."""
    return bool(owner) and owner in owners


def hot_by_demand(owner, visibility, owners):
    """Whether builds of an image may make it hot."""
    return visibility == 'public' or trusted(owner, owners)


class Budget:
    """Bytes of hot images admitted in one pass, per image and per owner.

    :param max_image: most bytes of one image (0: no bound).
    :param max_owner: most bytes of all the images of one owner (0: none).
    """

    def __init__(self, max_image, max_owner):
        self.max_image = max_image
        self.max_owner = max_owner
        self._by_owner = {}

    def refusal(self, owner, size):
        """Why an image of ``size`` bytes is not admitted, or ``None``.

        An admitted image counts against its owner's bytes.
        """
        size = size or 0
        if self.max_image and size > self.max_image:
            return 'its %d bytes exceed the bound of %d per image' % (
                size, self.max_image)
        used = self._by_owner.get(owner, 0)
        if self.max_owner and used + size > self.max_owner:
            return ('its owner\'s hot images would take %d bytes, over the '
                    'bound of %d per owner' % (used + size, self.max_owner))
        self._by_owner[owner] = used + size
        return None
