#!/usr/bin/env bash
# The jobs of tox's aio environment, which all share its one install (tox 4
# recreates an environment when another environment name uses its
# directory, so the main job and the tests must not each have their own):
#   tests [ARGS]        the example task's tests, then the all-in-one suite
#                       (the default; ARGS go to its "ci" command)
#   experiment [ARGS]   the main job: the experiment on the all-in-one cloud
#   ablations [ARGS]    the experiment with every ablation arm
#   demo [ARGS]         one launch, stock and with mlaccel, side by side
# tox passes the environment's temporary directory first; the cloud lives
# under it.
set -u
cd "$(dirname "$0")/.." || exit 1
tmp=$1
job=${2:-tests}
shift $(($# < 2 ? $# : 2))
cloud=$tmp/cloud
# futurist imports eventlet, whose deprecation warning is not the user's
# of these commands to act on.
experiment_warnings=ignore:::futurist._utils
case $job in
tests)
    # The example task's tests count as a suite of their own; the cloud's
    # suite runs whatever they gave.
    bash tools/task-tests.sh
    exec python -m mlaccel_lab.testing.aio --base "$cloud" ci \
        --functional-tests tests/functional "$@"
    ;;
experiment)
    PYTHONWARNINGS=$experiment_warnings exec python -m mlaccel_lab.experiment \
        run aio --base "$cloud" --output experiment-results "$@"
    ;;
ablations)
    PYTHONWARNINGS=$experiment_warnings exec python -m mlaccel_lab.experiment \
        run aio --ablations --base "$cloud" --output experiment-ablations "$@"
    ;;
demo)
    exec python -m mlaccel_lab.testing.aio --base "$cloud" demo "$@"
    ;;
*)
    echo "aio-job: unknown job '$job' (tests, experiment, ablations, demo)" >&2
    exit 2
    ;;
esac
