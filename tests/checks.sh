# Sourced by the shell tests: `check DESCRIPTION COMMAND...` runs COMMAND and
# counts a failure when it fails; `checks_done NAME` prints the tally and
# returns the test's status (non-zero when any check failed).
checks=0
failures=0

check() {
    what=$1
    shift
    checks=$((checks + 1))
    if "$@"; then
        printf 'ok: %s\n' "$what"
    else
        failures=$((failures + 1))
        printf 'FAIL: %s\n' "$what" >&2
    fi
}

checks_done() {
    printf '%s: %d checks, %d failed\n' "$1" "$checks" "$failures"
    [ "$failures" -eq 0 ]
}
