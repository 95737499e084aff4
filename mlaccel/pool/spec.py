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

"""What makes two task VMs interchangeable: a pool's spec and its key."""

import dataclasses
import hashlib
import json


@dataclasses.dataclass(frozen=True)
class PoolSpec:
    """The launch parameters every member of a pool shares.

    Ids, not names: a launch resolves its names first, so two names of one
    image meet in one pool. ``preload`` is the taskd preload profile,
    ``network`` as the launcher passes it to Nova (``'none'``, ``'auto'``
    or a list of ``{'uuid': id}``). ``boot_volume_gb``: the members boot
    from a volume of this many GiB made from the image (``None``:
    image-backed); a launch asking for a boot volume never gets an
    image-backed member, nor the other way round.
    """

    project_id: str
    image_id: str
    flavor_id: str
    preload: tuple = ()
    server_group_id: str = None
    network: object = 'none'
    taskd_port: int = 7070
    boot_volume_gb: int = None

    def __post_init__(self):
        object.__setattr__(self, 'preload', tuple(self.preload))
        if isinstance(self.network, list):
            object.__setattr__(self, 'network', tuple(
                tuple(sorted(n.items())) for n in self.network))
        for name in ('image_id', 'flavor_id'):
            if not isinstance(getattr(self, name), str) or \
                    not getattr(self, name):
                raise ValueError('%s must be a non-empty string' % name)
        size = self.boot_volume_gb
        if size is not None and (isinstance(size, bool) or not isinstance(
                size, int) or size < 1):
            raise ValueError('boot_volume_gb must be a whole number of GiB '
                             '(1 or more) or None, got %r' % (size,))

    @property
    def key(self):
        """A short stable id of the spec; names the pool."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def networks(self):
        """``network`` in the form the launcher gives Nova."""
        if isinstance(self.network, tuple):
            return [dict(n) for n in self.network]
        return self.network

    def to_dict(self):
        data = dataclasses.asdict(self)
        data['preload'] = list(self.preload)
        data['network'] = self.networks
        if self.boot_volume_gb is None:
            # Image-backed pools keep the keys they had before the field.
            del data['boot_volume_gb']
        return data

    @classmethod
    def from_dict(cls, data):
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)
                      if f.name in data})
