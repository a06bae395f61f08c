#!/bin/sh
# Speculative decoding through the real binary, on tiny random-weight models:
#   - tern-cli mkmodel --arch dflash writes a draft for a target;
#   - tern-cli run --spec none|lookup|draft:PATH|dflash:PATH prints the same
#     answer (greedy) and, with a drafter, its statistics;
#   - tern-cli bench --spec oracle,... finishes with every run giving the
#     plain tokens ("same out yes") and the oracle accepting 100%;
#   - run --raw --spec gives the plain --raw tokens;
#   - a gemma4 target with drafts in llama.cpp's dflash layout (window and
#     pattern, softcapping, d2t, Gemma-style layers): the same answers in
#     plain, raw, flash (--single-turn) and chat runs;
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

# --raw completions with speculation: the same text as plain --raw.
"$cli" run -m "$tmp/target.gguf" -p "$prompt" -n 40 -t 2 --raw --json >"$tmp/raw-plain" \
    2>"$tmp/raw-plain.err"
check "run --raw plain" grep -q '"tokens":\[[0-9]' "$tmp/raw-plain"
tokens() { sed -n 's/.*"tokens":\(\[[^]]*\]\).*/\1/p' "$1"; }
for spec in lookup "draft:$tmp/draft.gguf" "dflash:$tmp/dflash.gguf"; do
    "$cli" run -m "$tmp/target.gguf" -p "$prompt" -n 40 -t 2 --raw --json --spec "$spec" \
        >"$tmp/raw-spec" 2>"$tmp/raw-spec.err"
    check "run --raw --spec $spec: same tokens" \
        test "$(tokens "$tmp/raw-plain")" = "$(tokens "$tmp/raw-spec")"
    check "run --raw --spec $spec: drafts verified" grep -q '"verify_steps":[1-9]' "$tmp/raw-spec"
done
printf '%s' "$prompt" | "$cli" run -m "$tmp/target.gguf" -n 40 -t 2 --raw \
    --spec "dflash:$tmp/dflash.gguf" >"$tmp/raw-stdin" 2>"$tmp/raw-stdin.err"
"$cli" run -m "$tmp/target.gguf" -p "$prompt" -n 40 -t 2 --raw >"$tmp/raw-text" 2>/dev/null
check "run --raw --spec, prompt on stdin: the same text" cmp -s "$tmp/raw-text" "$tmp/raw-stdin"

# A gemma4 target and drafts in llama.cpp's dflash layout: the target's window
# and pattern, softcapping and scaled embedding; a d2t reduced vocabulary with
# Gemma-style layers. The same answers in plain, flash and chat runs, raw too.
"$cli" mkmodel --arch gemma4 --type q8_0 --embd 64 --layers 6 --heads 2 --kv-heads 1 \
    --head-dim 64 --head-dim-swa 32 --ff 128 --per-layer 32 --shared-kv 3 --swa-period 3 \
    --window 16 --seed 8 -t 2 -o "$tmp/g4.gguf" >/dev/null 2>"$tmp/g4.err"
check "mkmodel gemma4 target" test -s "$tmp/g4.gguf"
"$cli" mkmodel --arch dflash --target "$tmp/g4.gguf" --layers 3 -o "$tmp/g4-dflash.gguf"
"$cli" mkmodel --arch dflash --target "$tmp/g4.gguf" --layers 2 --draft-vocab 300 \
    --gemma-layers --block-size 8 -o "$tmp/g4-d2t.gguf"
"$cli" info "$tmp/g4-dflash.gguf" >"$tmp/g4-info" 2>&1
check "gemma4 draft: window and pattern" grep -q 'dflash.attention.sliding_window_pattern' "$tmp/g4-info"
check "gemma4 draft: softcapping" grep -q 'dflash.final_logit_softcapping' "$tmp/g4-info"
"$cli" info "$tmp/g4-d2t.gguf" >"$tmp/g4-info" 2>&1
check "d2t draft: the map" grep -q 'd2t' "$tmp/g4-info"
"$cli" run -m "$tmp/g4.gguf" -p "$prompt" -n 40 -t 2 >"$tmp/g4-plain" 2>/dev/null
"$cli" run -m "$tmp/g4.gguf" -p "$prompt" -n 40 -t 2 --raw --json >"$tmp/g4-raw" 2>/dev/null
for d in g4-dflash g4-d2t; do
    "$cli" run -m "$tmp/g4.gguf" -p "$prompt" -n 40 -t 2 --spec "dflash:$tmp/$d.gguf" \
        >"$tmp/g4-spec" 2>"$tmp/g4-spec.err"
    check "gemma4 run --spec dflash:$d: same answer" cmp -s "$tmp/g4-plain" "$tmp/g4-spec"
    "$cli" run -m "$tmp/g4.gguf" -p "$prompt" -n 40 -t 2 --raw --json \
        --spec "dflash:$tmp/$d.gguf" >"$tmp/g4-spec" 2>"$tmp/g4-spec.err"
    check "gemma4 run --raw --spec dflash:$d: same tokens" \
        test "$(tokens "$tmp/g4-raw")" = "$(tokens "$tmp/g4-spec")"
    for mode in --single-turn --chat; do
        printf '%s\n' "$requests" | "$cli" run $mode -m "$tmp/g4.gguf" -s "be brief" -n 24 -t 2 \
            --no-pin-cache --json >"$tmp/g4-st-plain" 2>/dev/null
        printf '%s\n' "$requests" | "$cli" run $mode -m "$tmp/g4.gguf" -s "be brief" -n 24 -t 2 \
            --no-pin-cache --json --spec "dflash:$tmp/$d.gguf" >"$tmp/g4-st-spec" \
            2>"$tmp/g4-st-spec.err"
        answers "$tmp/g4-st-plain" >"$tmp/g4-a1"
        answers "$tmp/g4-st-spec" >"$tmp/g4-a2"
        check "gemma4 run $mode --spec dflash:$d: same answers" \
            sh -c '[ -s "$1" ] && cmp -s "$1" "$2"' _ "$tmp/g4-a1" "$tmp/g4-a2"
        check "gemma4 run $mode --spec dflash:$d: drafts verified" \
            grep -q '"verify_steps":[1-9]' "$tmp/g4-st-spec"
    done
done
expect 2 "was made for another model" run -m "$tmp/target.gguf" -p hi \
    --spec "dflash:$tmp/g4-dflash.gguf"
expect 1 "--draft-vocab needs" mkmodel --arch dflash --target "$tmp/g4.gguf" --draft-vocab x \
    -o "$tmp/bad.gguf"

# A Gemma 4 MTP assistant in llama.cpp's gemma4-assistant layout: the same
# answers in plain, raw, flash and chat runs, with drafts made and verified.
"$cli" mkmodel --arch gemma4-assistant --target "$tmp/g4.gguf" --embd 32 --layers 2 --heads 2 \
    --ff 64 -o "$tmp/g4-mtp.gguf"
"$cli" info "$tmp/g4-mtp.gguf" >"$tmp/g4-info" 2>&1
check "assistant: its architecture" grep -q 'general.architecture = "gemma4-assistant"' "$tmp/g4-info"
check "assistant: the target's width" grep -q 'gemma4-assistant.embedding_length_out = 64' "$tmp/g4-info"
"$cli" run -m "$tmp/g4.gguf" -p "$prompt" -n 40 -t 2 --spec "mtp:$tmp/g4-mtp.gguf" \
    >"$tmp/g4-spec" 2>"$tmp/g4-spec.err"
check "gemma4 run --spec mtp: same answer" cmp -s "$tmp/g4-plain" "$tmp/g4-spec"
"$cli" run -m "$tmp/g4.gguf" -p "$prompt" -n 40 -t 2 --raw --json --spec "mtp:$tmp/g4-mtp.gguf" \
    >"$tmp/g4-spec" 2>"$tmp/g4-spec.err"
check "gemma4 run --raw --spec mtp: same tokens" \
    test "$(tokens "$tmp/g4-raw")" = "$(tokens "$tmp/g4-spec")"
check "gemma4 run --raw --spec mtp: drafts verified" grep -q '"drafted":[1-9]' "$tmp/g4-spec"
for mode in --single-turn --chat; do
    printf '%s\n' "$requests" | "$cli" run $mode -m "$tmp/g4.gguf" -s "be brief" -n 24 -t 2 \
        --no-pin-cache --json >"$tmp/g4-st-plain" 2>/dev/null
    printf '%s\n' "$requests" | "$cli" run $mode -m "$tmp/g4.gguf" -s "be brief" -n 24 -t 2 \
        --no-pin-cache --json --spec "mtp:$tmp/g4-mtp.gguf" >"$tmp/g4-st-spec" \
        2>"$tmp/g4-st-spec.err"
    answers "$tmp/g4-st-plain" >"$tmp/g4-a1"
    answers "$tmp/g4-st-spec" >"$tmp/g4-a2"
    check "gemma4 run $mode --spec mtp: same answers" \
        sh -c '[ -s "$1" ] && cmp -s "$1" "$2"' _ "$tmp/g4-a1" "$tmp/g4-a2"
    check "gemma4 run $mode --spec mtp: drafts verified" \
        grep -q '"verify_steps":[1-9]' "$tmp/g4-st-spec"
done
"$cli" bench --spec "mtp:$tmp/g4-mtp.gguf" -m "$tmp/g4.gguf" -p 16 -n 16 -t 2 -r 1 \
    >"$tmp/bench-mtp" 2>"$tmp/bench-mtp.err"
check "bench --spec mtp: the assistant's row gives the plain tokens" \
    grep -q '^mtp.* yes$' "$tmp/bench-mtp"
expect 2 "Gemma 4 models only" run -m "$tmp/target.gguf" -p hi --spec "mtp:$tmp/g4-mtp.gguf"
expect 2 "not a Gemma 4 assistant" run -m "$tmp/g4.gguf" -p hi --spec "mtp:$tmp/g4-dflash.gguf"
expect 1 "must differ from the target" mkmodel --arch gemma4-assistant --target "$tmp/g4.gguf" \
    --embd 64 -o "$tmp/bad.gguf"
expect 1 "made for a gemma4 model" mkmodel --arch gemma4-assistant --target "$tmp/target.gguf" \
    -o "$tmp/bad.gguf"

if grep -q -e 'Sanitizer' -e 'runtime error' "$tmp"/*.err 2>/dev/null; then
    failures=$((failures + 1))
    echo "FAIL: sanitizer report" >&2
fi
checks_done cli-spec
