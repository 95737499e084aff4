#!/usr/bin/env bash
# The project's test command: every suite the README names, run through tox
# from a private virtualenv (tools/bootstrap.sh), ending with one line
# "N passed, N failed, N skipped" over all of them. Exits non-zero when any
# suite failed. Arguments replace the list of suites, e.g.
#   tools/run-tests.sh py3 pep8
# When aio runs with other suites, it runs beside them: its cloud's
# services spend most of the job waiting on each other, so the in-process
# suites run meanwhile, at a lower CPU priority (nice) so that the cloud
# keeps the processors it asks for. The system packages and every
# environment are installed first, one at a time.
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

# Run suite $1 through tox, prefixed by the words of $prefix (nice); its
# output to stdout. Options after it go to tox.
prefix=()
run_env() {
    local env=$1
    shift
    case $env in
    py3)
        rm -rf .stestr
        "${prefix[@]}" tox -e py3 "$@"
        ;;
    aio)
        mkdir -p .tox
        "${prefix[@]}" tox -e aio "$@" 2>&1 | tee .tox/aio.log
        return "${PIPESTATUS[0]}"
        ;;
    *)
        "${prefix[@]}" tox -e "$env" "$@"
        ;;
    esac
}

# Add the counts of suite $1, whose tox exited with status $2.
count_env() {
    local env=$1 code=$2 suite before
    [ "$code" = 0 ] || status=1
    case $env in
    py3)
        count_stestr py3 "" py3
        ;;
    functional)
        for suite in "${functional_suites[@]}"; do
            count_stestr "$suite" ".stestr-$suite" functional
        done
        rm -rf .stestr-functional*
        ;;
    aio)
        # The example task's tests run first in the same environment
        # (tools/task-tests.sh), counted as a suite of their own.
        count_stestr task ".stestr-task" aio
        rm -rf .stestr-task
        before=$failed
        count_aio
        # A job that stopped before its tests (a bring-up that failed)
        # still counts as a failure.
        if [ "$code" != 0 ] && [ "$failed" -le "$before" ]; then
            failed=$((failed + 1))
        fi
        ;;
    *)
        # Checks that are not test suites count as one test each.
        if [ "$code" = 0 ]; then
            passed=$((passed + 1))
            summary+=("$env: passed")
        else
            failed=$((failed + 1))
            summary+=("$env: FAILED")
        fi
        ;;
    esac
}

# Say so when any of the environments $@ is not installed yet.
first_run_note() {
    local env new=()
    for env in "$@"; do
        [ -d ".tox/$env" ] || new+=("$env")
    done
    [ ${#new[@]} -eq 0 ] && return
    echo "First run of ${new[*]}: tox installs their dependencies now" \
         "(nova, cinder, torch...); the installs take about 10 minutes and" \
         "6 GB of disk."
}

others=()
beside=0
for env in "${suites[@]}"; do
    if [ "$env" = aio ]; then beside=1; else others+=("$env"); fi
done
[ ${#others[@]} -gt 0 ] || beside=0

if [ "$beside" = 1 ]; then
    echo "=== installing: ${suites[*]}"
    first_run_note "${suites[@]}"
    # Every system package and environment now, one at a time: apt takes
    # one install at a time, and tox builds the package once for all.
    if ! { bash tools/install-bindep.sh test &&
           bash tools/install-bindep.sh aio &&
           tox -e "$(IFS=,; echo "${suites[*]}")" --notest; }; then
        echo "=== summary"
        echo "the installs failed"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
    echo "=== tox -e aio, beside the others (its output follows theirs)"
    run_env aio --skip-pkg-install >/dev/null 2>&1 &
    aio_pid=$!
    # Stopped, the job takes its cloud down (mlaccel_lab.testing.aio.ci).
    trap 'pkill -TERM -P "$aio_pid"; kill "$aio_pid" 2>/dev/null' INT TERM
    prefix=(nice -n 5)
    for env in "${others[@]}"; do
        echo "=== tox -e $env"
        run_env "$env" --skip-pkg-install
        count_env "$env" $?
    done
    wait "$aio_pid"
    code=$?
    echo "=== tox -e aio"
    cat .tox/aio.log
    count_env aio "$code"
else
    for env in "${suites[@]}"; do
        echo "=== tox -e $env"
        first_run_note "$env"
        run_env "$env"
        count_env "$env" $?
    done
fi
rm -rf .stestr

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $status
