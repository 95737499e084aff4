#!/usr/bin/env bash
# The project's test command: every suite the README names, run through tox
# from a private virtualenv (tools/bootstrap.sh), ending with one line
# "N passed, N failed, N skipped" over all of them. Exits non-zero when any
# suite failed. Arguments replace the list of suites, e.g.
#   tools/run-tests.sh py3 pep8
set -u
cd "$(dirname "$0")/.." || exit 1

bin=$(tools/bootstrap.sh) || { echo "bootstrap failed" >&2; exit 1; }
export PATH="$bin:$PATH"

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(py3 functional aio pep8 genconfig-check wheel-check)
# tox -e functional runs these four, each counted on its own.
functional_suites=(functional functional-eventlet functional-cinder
                   functional-cinder-eventlet)

passed=0
failed=0
skipped=0
status=0
summary=()   # one line per suite: its name, counts and failed tests

# Add the counts of suite $1's last stestr run (repository $2, empty for
# stestr's default, with the stestr of env $3), or one failure if none ran.
count_stestr() {
    local out p f s
    local bin=".tox/$3/bin/stestr" repo=()
    [ -z "$2" ] || repo=(--repo-url "$2")
    # stestr last exits non-zero when the run had failures: read its output.
    out=$([ -x "$bin" ] && "$bin" "${repo[@]}" last 2>/dev/null)
    if ! grep -q '^ - Passed:' <<<"$out"; then
        failed=$((failed + 1))
        summary+=("$1: no test ran")
        return
    fi
    p=$(sed -n 's/^ - Passed: \([0-9]*\).*/\1/p' <<<"$out")
    f=$(sed -n 's/^ - Failed: \([0-9]*\).*/\1/p' <<<"$out")
    s=$(sed -n 's/^ - Skipped: \([0-9]*\).*/\1/p' <<<"$out")
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    skipped=$((skipped + ${s:-0}))
    summary+=("$1: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped")
    if [ "${f:-0}" -gt 0 ]; then
        local name
        while read -r name; do
            [ -n "$name" ] && summary+=("  FAILED ${name}")
        done < <("$bin" "${repo[@]}" failing --list 2>/dev/null)
        # ...and why, one line per failure, so a short log still says it.
        while read -r name; do
            summary+=("    ${name:0:300}")
        done < <("$bin" "${repo[@]}" failing 2>/dev/null |
                 grep -E '^[A-Za-z_.]*(Error|Exception|Failure|Mismatch|Timeout)[A-Za-z]*: ' |
                 head -n 10)
    fi
}

# The all-in-one job ends with "aio job: ... N passed, N failed, N skipped".
count_aio() {
    local line
    line=$(grep '^aio job:' .tox/aio.log | tail -n 1)
    if [ -z "$line" ]; then
        failed=$((failed + 1))
        summary+=("aio: the job stopped before its summary")
        return
    fi
    passed=$((passed + $(sed -n 's/.* \([0-9]*\) passed.*/\1/p' <<<"$line")))
    failed=$((failed + $(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")))
    skipped=$((skipped + $(sed -n 's/.* \([0-9]*\) skipped.*/\1/p' <<<"$line")))
    summary+=("aio: ${line#aio job: }")
    # ...and, under it, the failed tests and why (see mlaccel_lab.testing.aio.ci).
    while read -r line; do
        case $line in
        "aio failed: "*) summary+=("  FAILED ${line#aio failed: }") ;;
        "aio why: "*) summary+=("    ${line#aio why: }") ;;
        esac
    done < <(grep -E '^aio (failed|why): ' .tox/aio.log)
}

for env in "${suites[@]}"; do
    echo "=== tox -e $env"
    if [ ! -d ".tox/$env" ]; then
        echo "First run of $env: tox installs its dependencies now (nova, cinder," \
             "torch...); the installs take about 10 minutes and 6 GB of disk," \
             "and all suites together about 40 minutes on two cores."
    fi
    case $env in
    py3)
        rm -rf .stestr
        tox -e py3 || status=1
        count_stestr py3 "" py3
        ;;
    functional)
        tox -e functional || status=1
        for suite in "${functional_suites[@]}"; do
            count_stestr "$suite" ".stestr-$suite" functional
        done
        rm -rf .stestr-functional*
        ;;
    aio)
        mkdir -p .tox
        tox -e aio 2>&1 | tee .tox/aio.log
        aio_status=${PIPESTATUS[0]}
        # The example task's tests run first in the same environment
        # (tools/task-tests.sh), counted as a suite of their own.
        count_stestr task ".stestr-task" aio
        rm -rf .stestr-task
        before=$failed
        count_aio
        if [ "$aio_status" != 0 ]; then
            status=1
            # A job that stopped before its tests (a bring-up that failed)
            # still counts as a failure.
            [ "$failed" -gt "$before" ] || failed=$((failed + 1))
        fi
        ;;
    *)
        # Checks that are not test suites count as one test each.
        if tox -e "$env"; then
            passed=$((passed + 1))
            summary+=("$env: passed")
        else
            failed=$((failed + 1))
            status=1
            summary+=("$env: FAILED")
        fi
        ;;
    esac
done
rm -rf .stestr

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $status
