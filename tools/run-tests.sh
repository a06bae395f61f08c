#!/usr/bin/env bash
# Runs every test of a configured build directory, then the fuzzers for a
# bounded time, and ends with one line "N passed, N failed".
# Usage: tools/run-tests.sh BUILD_DIR [FUZZ_BUILD_DIR]
set -uo pipefail
build=${1:?usage: run-tests.sh BUILD_DIR [FUZZ_BUILD_DIR]}
fuzz_build=${2:-}
fuzz_seconds=${TERN_FUZZ_SECONDS:-60}
root=$(cd "$(dirname "$0")/.." && pwd)

passed=0
failed=0
failures=()

meson test -C "$build" --print-errorlogs --num-processes "${TERN_TEST_JOBS:-2}" \
    --timeout-multiplier "${TERN_TIMEOUT_MULTIPLIER:-3}"
log="$build/meson-logs/testlog.json"
if [ -f "$log" ]; then
    read -r p f names < <(python3 - "$log" <<'PY'
import json, sys
p = f = 0
bad = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    if r["result"] in ("OK", "EXPECTEDFAIL", "SKIP"):
        p += 1
    else:
        f += 1
        bad.append(r["name"])
print(p, f, ",".join(bad) or "-")
PY
)
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$names" != "-" ] && failures+=("$names")
else
    echo "run-tests: no test log in $build (did the build fail?)" >&2
    failed=$((failed + 1))
    failures+=("meson-test")
fi

if [ -n "$fuzz_build" ]; then
    for fuzzer in "$fuzz_build"/tests/fuzz/fuzz-*; do
        [ -f "$fuzzer" ] && [ -x "$fuzzer" ] || continue
        name=$(basename "$fuzzer")
        corpus="$root/tests/fuzz/corpus/${name#fuzz-}"
        work=$(mktemp -d)
        [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
        echo "run-tests: $name for ${fuzz_seconds}s"
        if "$fuzzer" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -max_len=65536 \
                -print_final_stats=1 "$work" >"$fuzz_build/$name.log" 2>&1; then
            tail -n 12 "$fuzz_build/$name.log"
            passed=$((passed + 1))
        else
            tail -n 60 "$fuzz_build/$name.log"
            failed=$((failed + 1))
            failures+=("$name")
        fi
        rm -rf "$work"
    done
fi

if [ ${#failures[@]} -gt 0 ]; then
    echo "failed: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
