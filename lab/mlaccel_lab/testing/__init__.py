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

"""Test-only parts of mlaccel: never configure them in a production cloud.

- :mod:`mlaccel_lab.testing.virt`: a Nova test virt driver built on Nova's fake
  driver that really fetches images into the host's image cache and really
  starts the guest process named by an instance's user-data.
- :mod:`mlaccel_lab.testing.aio`: an all-in-one OpenStack cloud on loopback for
  the tempest plugin, the devstack plugin's test and functional tests.
"""
