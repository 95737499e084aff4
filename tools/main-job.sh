#!/usr/bin/env bash
# The main job: today the scheduler benchmark, stock against mlaccel.
set -eu
cd "$(dirname "$0")/.."
exec tox -e bench -- scheduler "$@"
