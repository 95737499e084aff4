#!/usr/bin/env bash
# The main job: bring the all-in-one cloud up, launch the example multimodal
# task on it with and without mlaccel, print both life-cycle records side by
# side, and tear the cloud down. Needs root (it installs MariaDB, RabbitMQ and
# Redis from the distribution when they are missing). Options go to the demo:
#   tools/main-job.sh --rounds 3 --count 2 --output records.json
set -eu
cd "$(dirname "$0")/.."
bin=$(tools/bootstrap.sh)
export PATH="$bin:$PATH"
exec tox -e aio-demo -- "$@"
