#!/usr/bin/env bash
# The functional suites, run by "tox -e functional" in one environment:
#   functional                  Nova's harness, native threads
#   functional-eventlet         Nova's harness, eventlet
#   functional-cinder           Cinder's harness, native threads
#   functional-cinder-eventlet  Cinder's harness, eventlet
# Cinder's harness cannot share a process with Nova's (both register
# [DEFAULT] default_availability_zone), and each concurrency mode is set
# before the harness imports, so each suite is a stestr run of its own, with
# its own repository (.stestr-<suite>) for tools/run-tests.sh to count.
# Usage: functional.sh [SUITE [STESTR FILTER ...]]; no SUITE runs all four.
# Exits non-zero when any suite failed; every suite runs regardless.
set -u
cd "$(dirname "$0")/.." || exit 1

all=(functional functional-eventlet functional-cinder functional-cinder-eventlet)

run_suite() {
    local suite=$1 eventlet=0 cinder=0 path=./tests/functional
    shift
    case $suite in
    functional) ;;
    functional-eventlet) eventlet=1 ;;
    functional-cinder) cinder=1 ;;
    functional-cinder-eventlet) eventlet=1 cinder=1 ;;
    *) echo "unknown suite $suite; one of: ${all[*]}" >&2; return 2 ;;
    esac
    [ "$cinder" = 1 ] && path=./tests/functional/cinder
    echo "=== $suite"
    local repo=(--repo-url ".stestr-$suite")
    rm -rf ".stestr-$suite"
    mkdir ".stestr-$suite" && stestr "${repo[@]}" init >/dev/null || return 1
    env OS_NOVA_DISABLE_EVENTLET_PATCHING=$((1 - eventlet)) \
        OS_CINDER_DISABLE_EVENTLET_PATCHING=$((1 - eventlet)) \
        MLACCEL_FUNCTIONAL_CINDER=$cinder \
        stestr "${repo[@]}" --test-path "$path" --top-dir ./ run "$@"
}

if [ $# -gt 0 ]; then
    run_suite "$@"
    exit
fi
status=0
for suite in "${all[@]}"; do
    run_suite "$suite" || status=1
done
exit $status
