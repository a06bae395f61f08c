#!/usr/bin/env bash
# Runs every test of a configured build directory, then the fuzzers for a
# bounded time, and ends with one line "N passed, N failed, N skipped"
# (a skip is not a pass); exits non-zero when any failed.
# Usage: tools/run-tests.sh [--build] BUILD_DIR [FUZZ_BUILD_DIR]
#   --build: compile both build directories first (a failed build is one failure).
set -uo pipefail
compile=false
if [ "${1:-}" = --build ]; then
    compile=true
    shift
fi
build=${1:?usage: run-tests.sh [--build] BUILD_DIR [FUZZ_BUILD_DIR]}
fuzz_build=${2:-}
fuzz_seconds=${TERN_FUZZ_SECONDS:-30}
root=$(cd "$(dirname "$0")/.." && pwd)

passed=0
failed=0
skipped=0
failures=()
skips=()

if $compile; then
    if ! meson compile -C "$build" || { [ -n "$fuzz_build" ] && ! meson compile -C "$fuzz_build"; }; then
        echo "the build failed"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
fi

meson test -C "$build" --print-errorlogs --num-processes "${TERN_TEST_JOBS:-2}" \
    --timeout-multiplier "${TERN_TIMEOUT_MULTIPLIER:-3}"
log="$build/meson-logs/testlog.json"
if [ -f "$log" ]; then
    # Tab-separated: test names hold spaces ("tern:cli / cli-run").
    IFS=$'\t' read -r p f s names skipnames < <(python3 - "$log" <<'PY'
import json, sys
p = f = s = 0
bad, skip = [], []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    if r["result"] in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r["result"] == "SKIP":
        s += 1
        skip.append(r["name"])
    else:
        f += 1
        bad.append(r["name"])
print(p, f, s, ", ".join(bad) or "-", ", ".join(skip) or "-", sep="\t")
PY
)
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
    [ "$names" != "-" ] && failures+=("$names")
    [ "$skipnames" != "-" ] && skips+=("$skipnames")
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

if [ ${#skips[@]} -gt 0 ]; then
    echo "skipped (see their logs for why): ${skips[*]}"
fi
if [ ${#failures[@]} -gt 0 ]; then
    echo "failed: ${failures[*]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
