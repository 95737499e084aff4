#!/usr/bin/env bash
# The example task's unit tests (tests/task), which need torch: run in
# the aio environment, the one that installs it, into their own stestr
# repository (.stestr-task) for tools/run-tests.sh to count.
set -u
cd "$(dirname "$0")/.." || exit 1
rm -rf .stestr-task
mkdir .stestr-task && stestr --repo-url .stestr-task init >/dev/null || exit 1
exec stestr --repo-url .stestr-task --test-path ./tests/task \
    --top-dir ./ run "$@"
