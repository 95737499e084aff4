#!/usr/bin/env bash
# The main job: bring the all-in-one cloud up, launch the example multimodal
# task on it with and without mlaccel, print both life-cycle records side by
# side, and tear the cloud down. Needs root (it installs MariaDB, RabbitMQ and
# Redis from the distribution when they are missing).
set -eu
cd "$(dirname "$0")/.."
python3 -m pip install --quiet 'tox>=4.6' bindep
exec tox -e aio-demo -- "$@"
