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

"""Dispatch ``python -m mlaccel.bench <name>`` to ``mlaccel.bench.<name>``
(or to :data:`ELSEWHERE`: ``experiment`` is :mod:`mlaccel.experiment.cli`).
"""

import importlib
import pkgutil
import sys

import mlaccel.bench


#: Benchmarks that live elsewhere: name -> module with ``main(argv)``.
ELSEWHERE = {'experiment': 'mlaccel.experiment.cli'}


def main(argv):
    modules = {m.name: 'mlaccel.bench.' + m.name
               for m in pkgutil.iter_modules(mlaccel.bench.__path__)
               if not m.name.startswith('_')}
    modules.update(ELSEWHERE)
    if not argv or argv[0] not in modules:
        print('usage: python -m mlaccel.bench {%s} [options]'
              % ','.join(sorted(modules)), file=sys.stderr)
        return 2
    return importlib.import_module(modules[argv[0]]).main(argv[1:])


sys.exit(main(sys.argv[1:]))
