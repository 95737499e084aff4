#!/usr/bin/env bash
# The main job: the experiment. Brings the all-in-one cloud up, runs the
# default workload as stock OpenStack and as OpenStack with mlaccel (arms
# interleaved, a warm-up and three repetitions), prints a progress bar per
# run, the stage table, the costs and the calibrated simulation at 1,000
# hosts, writes every record as JSON and the charts to experiment-results/,
# tears the cloud down and ends with the RESULT line. Needs root (it installs
# MariaDB, RabbitMQ and Redis from the distribution when they are missing).
# Arguments go to "python -m mlaccel_lab.experiment run aio": --seed N (another
# workload of the same shape), --workload FILE, --repetitions N, --ablations.
# tox and bindep come from a private virtualenv (tools/bootstrap.sh), never
# from the system's Python.
set -eu
cd "$(dirname "$0")/.."
bin=$(tools/bootstrap.sh)
exec "$bin/tox" -e aio -- experiment "$@"
