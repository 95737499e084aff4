#!/usr/bin/env bash
# The main job: bring the all-in-one cloud up, launch the example multimodal
# task on it with and without mlaccel, print both life-cycle records and a
# side-by-side table of the stages, and tear the cloud down. Needs root (it
# installs MariaDB, RabbitMQ and Redis from the distribution when they are
# missing). Arguments go to the demo: --count N, --rounds N, --steps N,
# --output FILE. tox and bindep come from a private virtualenv
# (tools/bootstrap.sh), never from the system's Python.
set -eu
cd "$(dirname "$0")/.."
bin=$(tools/bootstrap.sh)
exec "$bin/tox" -e aio-demo -- "$@"
