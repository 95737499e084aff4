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

"""The floors of the house: which parts of mlaccel may import which.

Read from the source (every import statement of every module), so a new
import across a floor fails here, in the unit tests, before review.
"""

import ast
import os

import mlaccel
import mlaccel_lab
from tests import testcase

#: The product's package and the lab's (a distribution of its own).
ROOTS = [os.path.dirname(mlaccel.__file__),
         os.path.dirname(mlaccel_lab.__file__)]

#: The lab: how the project proves itself, not what an operator installs.
LAB = {'lab'}
#: Operator services: run inside Nova, Cinder or beside them.
OPERATOR = {'scheduler', 'agent', 'cinder', 'pool'}
#: User and guest tools: a user's laptop, a task VM.
USER = {'launcher', 'taskd', 'tasks'}
#: Front doors over both floors: command lines and the tempest plugin.
FRONT = {'cmd', 'osc', 'tempest'}


def _part(module):
    """``mlaccel.<part>...`` -> part; a top-level module is the core.

    Every module of ``mlaccel_lab`` is the lab. A command line of the
    product lives in ``mlaccel.cmd`` (``python -m mlaccel.cmd.taskd``), so
    no ``__main__`` below it imports a front door.
    """
    parts = module.split('.')
    if parts[0] == 'mlaccel_lab':
        return 'lab'
    if len(parts) < 2 or parts[0] != 'mlaccel':
        return None
    return parts[1] if parts[1] in LAB | OPERATOR | USER | FRONT else 'core'


def _imports():
    """``(importing module, imported module)`` of every module."""
    for root in ROOTS:
        yield from _imports_under(root)


def _imports_under(root):
    for directory, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, os.path.dirname(root))[:-3]
            module = rel.replace(os.sep, '.').removesuffix('.__init__')
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        yield module, alias.name
                elif isinstance(node, ast.ImportFrom) and node.module \
                        and node.level == 0:
                    for alias in node.names:
                        yield module, '%s.%s' % (node.module, alias.name)


class LayersTest(testcase.TestCase):

    def crossings(self, allowed):
        """Imports from one part to another that ``allowed`` refuses."""
        found = []
        for module, imported in _imports():
            source, target = _part(module), _part(imported)
            if target is None or source == target:
                continue
            if not allowed(source, target):
                found.append('%s imports %s' % (module, imported))
        return sorted(set(found))

    def test_product_never_imports_the_lab(self):
        self.assertEqual([], self.crossings(
            lambda source, target: source in LAB or target not in LAB))

    def test_the_core_imports_only_the_core(self):
        self.assertEqual([], self.crossings(
            lambda source, target: source != 'core' or target == 'core'))

    def test_user_tools_never_import_operator_services(self):
        self.assertEqual([], self.crossings(
            lambda source, target: source not in USER
            or target not in OPERATOR))

    def test_nothing_below_imports_a_front_door(self):
        self.assertEqual([], self.crossings(
            lambda source, target: target not in FRONT
            or source in FRONT | LAB))

    def test_the_test_sees_every_import(self):
        """The walk finds what the tree is known to hold."""
        pairs = set(_imports())
        self.assertIn(('mlaccel.agent.cachefile', 'mlaccel.imagesafety'),
                      pairs)
        self.assertIn(('mlaccel_lab.experiment.aiorunner',
                       'mlaccel.launcher.api'), pairs)
