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

"""The experiment: stock OpenStack against OpenStack with mlaccel.

The same seeded workload (:mod:`.workload`) runs under each arm
(:mod:`.arms`) in an interleaved order (:mod:`.protocol`), on a cloud or a
model of one behind one interface (:mod:`.runner`); every launch record
is kept (:mod:`.results`) and summarised (:mod:`.stats`, :mod:`.report`,
:mod:`.charts`). A SimPy simulation of the same life cycle
(:mod:`.simulator`) is calibrated from the records (:mod:`.calibration`),
checked against them at their own size (:mod:`.validation`), run at
scale with stated production parameters (:mod:`.production`), and used to
plan the steps a task needs for its running share (:mod:`.steps`).
"""
