"""Dispatch ``python -m mlaccel.bench <name>`` to ``mlaccel.bench.<name>``."""

import importlib
import pkgutil
import sys

import mlaccel.bench


def main(argv):
    names = sorted(m.name for m in pkgutil.iter_modules(mlaccel.bench.__path__)
                   if not m.name.startswith('_'))
    if not argv or argv[0] not in names:
        print('usage: python -m mlaccel.bench {%s} [options]'
              % ','.join(names), file=sys.stderr)
        return 2
    return importlib.import_module('mlaccel.bench.' + argv[0]).main(argv[1:])


sys.exit(main(sys.argv[1:]))
