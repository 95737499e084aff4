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
[ ${#suites[@]} -gt 0 ] || suites=(py3 functional functional-eventlet functional-cinder
                                  functional-cinder-eventlet aio pep8 genconfig-check)

passed=0
failed=0
skipped=0
status=0
summary=()   # one line per suite: its name, counts and failed tests

# Add the counts of env $1's last stestr run, or one failure if none ran.
count_stestr() {
    local out p f s
    # stestr last exits non-zero when the run had failures: read its output.
    local bin
    for bin in ".tox/$1/bin/stestr" .tox/functional/bin/stestr \
               .tox/py3/bin/stestr ""; do
        [ -x "$bin" ] && break
    done
    out=$([ -n "$bin" ] && "$bin" last 2>/dev/null)
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
        done < <("$bin" failing --list 2>/dev/null)
        # ...and why, one line per failure, so a short log still says it.
        while read -r name; do
            summary+=("    ${name:0:300}")
        done < <("$bin" failing 2>/dev/null |
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
    # ...and, under it, the failed tests and why (see mlaccel.testing.aio.ci).
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
             "torch...); all suites together take about 10 minutes and 6 GB of disk."
    fi
    case $env in
    py3|functional*)
        rm -rf .stestr
        tox -e "$env" || status=1
        count_stestr "$env"
        ;;
    aio)
        mkdir -p .tox
        tox -e aio 2>&1 | tee .tox/aio.log
        aio_status=${PIPESTATUS[0]}
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
