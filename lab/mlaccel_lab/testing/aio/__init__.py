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

"""An all-in-one OpenStack cloud on loopback, for tests and experiments.

``python -m mlaccel_lab.testing.aio up`` stands up MariaDB, RabbitMQ, Redis,
keystone, glance (file store), placement, nova (API, conductor, scheduler
and two computes running :mod:`mlaccel_lab.testing.virt`) and cinder (fake
volume driver) from the Python environment it runs in, with mlaccel enabled
by ``mlaccel-config`` exactly as the devstack plugin enables it. Every
process is started in its own session, recorded by pid and carries a marker
in its environment; ``down`` stops the recorded ones and then sweeps any
process still carrying the marker, so nothing is left behind.
"""
