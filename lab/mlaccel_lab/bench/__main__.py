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

"""``python -m mlaccel_lab.bench <name>``: run the named benchmark.

Each name is a module of this package, or one of :data:`ELSEWHERE`
(``experiment`` is :mod:`mlaccel_lab.experiment.cli`).
"""

import importlib
import pkgutil
import sys

import mlaccel_lab.bench


#: Benchmarks that live elsewhere: name -> module with ``main(argv)``.
ELSEWHERE = {'experiment': 'mlaccel_lab.experiment.cli'}


def main(argv):
    # A module pools_demand is the benchmark pools-demand.
    modules = {m.name.replace('_', '-'): 'mlaccel_lab.bench.' + m.name
               for m in pkgutil.iter_modules(mlaccel_lab.bench.__path__)
               if not m.name.startswith('_')}
    modules.update(ELSEWHERE)
    if not argv or argv[0] not in modules:
        print('usage: python -m mlaccel_lab.bench {%s} [options]'
              % ','.join(sorted(modules)), file=sys.stderr)
        return 2
    return importlib.import_module(modules[argv[0]]).main(argv[1:])


sys.exit(main(sys.argv[1:]))
