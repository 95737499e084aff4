#!/usr/bin/env bash
# What the operator installs: build the mlaccel wheel and check that it
# ships no part of the lab (lab/: experiment, benches, test cloud,
# harnesses), requires none of the lab's dependencies, and holds the
# sample configuration and systemd units.
set -eu
cd "$(dirname "$0")/.." || exit 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Built from a copy of the tracked files, so no earlier build/ directory
# or untracked file can change what the wheel holds.
mkdir "$out/src"
git ls-files -z | xargs -0 cp --parents -t "$out/src"
(cd "$out/src" && PBR_VERSION=0.0.0 python -m pip wheel --quiet --no-deps \
    --no-build-isolation --wheel-dir "$out" .)
python - "$out"/mlaccel-*.whl <<'PY'
import sys
import zipfile

from packaging import requirements

LAB_MODULES = ('mlaccel_lab/', 'mlaccel/experiment/', 'mlaccel/bench/',
               'mlaccel/testing/')
LAB_DEPENDENCIES = {'simpy', 'matplotlib', 'numpy', 'tqdm', 'torch',
                    'pyyaml'}

wheel = zipfile.ZipFile(sys.argv[1])
names = wheel.namelist()
problems = ['ships %s' % name for name in names if name.startswith(LAB_MODULES)]
problems += ['ships %s outside the mlaccel package' % name for name in names
             if not name.startswith(('mlaccel/', 'mlaccel-'))]
# ...and ships what an operator installs beside the code.
for wanted in ('etc/mlaccel/mlaccel.conf.sample',
               'share/mlaccel/systemd/mlaccel-agent.service',
               'share/mlaccel/systemd/mlaccel-pool-manager.service'):
    if not any(n.endswith('.data/data/' + wanted) for n in names):
        problems.append('lacks %s' % wanted)
metadata = next(n for n in names if n.endswith('.dist-info/METADATA'))
for line in wheel.read(metadata).decode().splitlines():
    if line.startswith('Requires-Dist:'):
        req = requirements.Requirement(line.split(':', 1)[1].strip())
        if req.marker is None and req.name.lower() in LAB_DEPENDENCIES:
            problems.append('requires %s' % req.name)
    if line == 'Provides-Extra: experiment':
        problems.append('offers the experiment extra')
modules = sum(1 for n in names if n.endswith('.py'))
for problem in problems:
    print('wheel-check: the mlaccel wheel %s' % problem)
print('wheel-check: %s: %d files, %d modules, %d problems'
      % (sys.argv[1].rsplit('/', 1)[-1], len(names), modules, len(problems)))
sys.exit(1 if problems else 0)
PY
