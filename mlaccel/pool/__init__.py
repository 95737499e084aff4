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

"""Warm pools: task VMs already running a warm task daemon.

A pool (:mod:`mlaccel.pool.spec`) holds servers of one project that are
interchangeable for a launch. The pool manager (:mod:`mlaccel.pool.manager`)
keeps each pool at the size measured demand asks for
(:mod:`mlaccel.pool.sizing`); the launcher claims members
(:mod:`mlaccel.pool.claims`) before it creates any VM. Members' credentials
and the claims live in a private directory (:mod:`mlaccel.pool.store`),
serialised by a lock on the state bus.
"""
