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

"""Volume metadata keys of the mirror-volume cache.

No Cinder import: the admin command reads them through Cinder's API.
"""

#: On a golden volume: the image it holds, and that image's version.
IMAGE_KEY = 'mlaccel_golden_image'
CHECKSUM_KEY = 'mlaccel_image_checksum'
UPDATED_KEY = 'mlaccel_image_updated_at'
SIZE_KEY = 'mlaccel_image_size'
#: Seconds its fill took (what a miss would cost again).
COST_KEY = 'mlaccel_cost'
#: Present ('true') on a pinned golden volume.
PINNED_KEY = 'mlaccel_pinned'
#: On a ready-pool clone: the image it holds.
POOL_KEY = 'mlaccel_pool_image'
#: On a volume of the internal tenant: an operator's pre-warm request.
PREWARM_KEY = 'mlaccel_prewarm'
