#!/bin/sh
# Speculative decoding through the real binary, on tiny random-weight models:
#   - tern-cli mkmodel --arch dflash writes a draft for a target;
#   - tern-cli run --spec none|lookup|draft:PATH|dflash:PATH prints the same
#     answer (greedy) and, with a drafter, its statistics;
#   - tern-cli bench --spec oracle,... finishes with every run giving the
#     plain tokens ("same out yes") and the oracle accepting 100%;
#   - bad values and incompatible drafts: exit 1 (usage) or 2 (bad input)
#     with one line naming the problem.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
tmp=${TERN_TEST_TMP:-/tmp}/spec-cli.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

. "$(dirname "$0")/../checks.sh"

# expect STATUS WORD ARGS...: tern-cli ARGS exits STATUS with WORD on stderr.
expect() {
    want=$1
    word=$2
    shift 2
    "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    check "tern-cli $* -> $want ($(head -c 160 "$tmp/err"))" \
        sh -c "[ $got -eq $want ] && grep -q -- \"\$1\" \"\$2\" && [ \$(wc -l <\"\$2\") -eq 1 ]" \
        _ "$word" "$tmp/err"
}

mk() { # NAME ARCH TYPE EMBD LAYERS SEED
    "$cli" mkmodel --arch "$2" --type "$3" --embd "$4" --layers "$5" --heads 2 --kv-heads 1 \
        --head-dim 32 --ff 128 --seed "$6" -t 2 -o "$tmp/$1.gguf"
}

mk target qwen3 q8_0 64 2 5 && mk draft qwen3 q4_0 64 1 5 && mk wide qwen3 q8_0 96 2 6
check "mkmodel target and draft" test -s "$tmp/target.gguf" -a -s "$tmp/draft.gguf"
"$cli" mkmodel --arch dflash --target "$tmp/target.gguf" --block-size 8 -o "$tmp/dflash.gguf"
check "mkmodel --arch dflash" test -s "$tmp/dflash.gguf"
"$cli" info "$tmp/dflash.gguf" >"$tmp/info" 2>&1
check "the draft says dflash" grep -q 'general.architecture = "dflash"' "$tmp/info"
check "the draft has its block size" grep -q 'dflash.block_size = 8' "$tmp/info"

prompt="the cat sat on the mat, the cat sat on the mat, the cat sat on the"
"$cli" run -m "$tmp/target.gguf" -p "$prompt" -n 40 -t 2 >"$tmp/plain" 2>"$tmp/plain.err"
check "plain run" test -s "$tmp/plain"
for spec in lookup "draft:$tmp/draft.gguf" "dflash:$tmp/dflash.gguf"; do
    "$cli" run -m "$tmp/target.gguf" -p "$prompt" -n 40 -t 2 --spec "$spec" --draft-max 4 \
        >"$tmp/spec" 2>"$tmp/spec.err"
    check "run --spec $spec: same answer" cmp -s "$tmp/plain" "$tmp/spec"
    check "run --spec $spec: statistics" grep -q 'drafted [0-9]*, accepted' "$tmp/spec.err"
done
"$cli" run -m "$tmp/target.gguf" -p "$prompt" -n 20 -t 2 --spec lookup --json >"$tmp/json" 2>&1
check "run --spec --json has the fields" grep -q '"drafted":[0-9]*,"accepted":[0-9]*,"verify_steps":' "$tmp/json"

# Flash single-turn and chat: the same answers with speculation on, and a
# /spec line switches the drafter between requests without reloading.
answers() { # JSON-LINES-FILE: the "answer" of each line, one per line
    sed -n 's/.*"answer":\("[^"]*"\).*/\1/p' "$1"
}
steps() { # JSON-LINES-FILE: the verify_steps of each line, space separated
    grep -o '"verify_steps":[0-9]*' "$1" | sed 's/.*://' | tr '\n' ' '
}
requests="$prompt
one two three one two three one two"
for mode in --single-turn --chat; do
    printf '%s\n' "$requests" | "$cli" run $mode -m "$tmp/target.gguf" -s "be brief" -n 24 -t 2 \
        --no-pin-cache --json >"$tmp/st-plain" 2>"$tmp/st-plain.err"
    answers "$tmp/st-plain" >"$tmp/st-plain.answers"
    check "run $mode: two answers" test "$(wc -l <"$tmp/st-plain.answers")" -eq 2
    for spec in lookup "draft:$tmp/draft.gguf" "dflash:$tmp/dflash.gguf"; do
        printf '%s\n' "$requests" | "$cli" run $mode -m "$tmp/target.gguf" -s "be brief" -n 24 \
            -t 2 --no-pin-cache --json --spec "$spec" >"$tmp/st-spec" 2>"$tmp/st-spec.err"
        answers "$tmp/st-spec" >"$tmp/st-spec.answers"
        check "run $mode --spec $spec: same answers" cmp -s "$tmp/st-plain.answers" "$tmp/st-spec.answers"
        check "run $mode --spec $spec: drafts verified" grep -q '"verify_steps":[1-9]' "$tmp/st-spec"
    done
done
printf '%s\n/spec lookup\n%s\n/spec none\n%s\n' "$prompt" "$prompt" "$prompt" |
    "$cli" run --single-turn -m "$tmp/target.gguf" -s "be brief" -n 24 -t 2 --no-pin-cache \
        --json >"$tmp/toggle" 2>"$tmp/toggle.err"
check "/spec toggles: three answers" test "$(answers "$tmp/toggle" | wc -l)" -eq 3
check "/spec toggles: only the middle request speculated ($(steps "$tmp/toggle"))" \
    sh -c 'case "$1" in "0 "[1-9]*" 0 ") true ;; *) false ;; esac' _ "$(steps "$tmp/toggle")"
check "/spec toggles: the three answers are identical" \
    test "$(answers "$tmp/toggle" | sort -u | wc -l)" -eq 1
printf '/spec draft:%s\nhello\n' "$tmp/nope.gguf" |
    "$cli" run --single-turn -m "$tmp/target.gguf" -s hi -n 4 -t 2 --no-pin-cache --json \
        >"$tmp/miss" 2>"$tmp/miss.err"
check "/spec with a missing draft: an error naming it" grep -q nope.gguf "$tmp/miss.err"
check "/spec with a missing draft: the session goes on" grep -q '"answer"' "$tmp/miss"

"$cli" bench --spec oracle,lookup,"draft:$tmp/draft.gguf","dflash:$tmp/dflash.gguf" \
    -m "$tmp/target.gguf" -p 16 -n 32 -t 2 -r 1 >"$tmp/bench" 2>"$tmp/bench.err"
status=$?
check "bench --spec exits 0 ($(head -c 200 "$tmp/bench.err"))" test $status -eq 0
check "bench --spec: every run gives the plain tokens" sh -c \
    "[ \$(grep -c ' yes\$' \"\$1\") -eq 6 ] && ! grep -q ' NO\$' \"\$1\"" _ "$tmp/bench"
check "bench --spec: the oracle accepts everything" sh -c \
    "[ \$(grep '^oracle' \"\$1\" | grep -c ' 100%') -eq 3 ]" _ "$tmp/bench"
check "bench --spec: the verify-cost curve and break-even" grep -q 'break-even' "$tmp/bench"

expect 1 "--spec needs" run -m "$tmp/target.gguf" -p hi --spec magic
expect 1 "--draft-max needs" run -m "$tmp/target.gguf" -p hi --spec lookup --draft-max 0
expect 2 "nope.gguf" run -m "$tmp/target.gguf" -p hi --spec "draft:$tmp/nope.gguf"
expect 2 "is 64 wide but the target" run -m "$tmp/wide.gguf" -p hi --spec "dflash:$tmp/dflash.gguf"
expect 1 "target layer 7 does not exist" mkmodel --arch dflash --target "$tmp/target.gguf" \
    --target-layers 1,7 -o "$tmp/bad.gguf"
expect 1 "needs --target" mkmodel --arch dflash -o "$tmp/bad.gguf"
expect 1 "not with --raw" run -m "$tmp/target.gguf" -p hi --raw --spec lookup

if grep -q -e 'Sanitizer' -e 'runtime error' "$tmp"/*.err 2>/dev/null; then
    failures=$((failures + 1))
    echo "FAIL: sanitizer report" >&2
fi
checks_done cli-spec
