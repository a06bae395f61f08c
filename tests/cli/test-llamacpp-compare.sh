#!/bin/sh
# tools/llamacpp-compare.mjs and tools/compare/top1-compare.sh, the harness
# that holds Tern to llama.cpp, against a stand-in for node-llama-cpp
# (tests/data/fake-node-llama-cpp): both engines must be fed the same ids.
# The harness once evaluated the text's tokens without BOS on llama.cpp's
# side while `tern-cli perplexity` puts BOS first (as llama.cpp's perplexity
# tool does), so on every vocabulary with BOS (Llama 2, Gemma 3) each
# position was compared against a different context and "disagreed".
#
# Vocabularies: the synthetic one (BOS), the real Llama 2 one (BOS) and the
# real GPT-2 one (no BOS) from TERN_VOCAB_DIR.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_SOURCE_ROOT,
# TERN_TEST_TMP, TERN_VOCAB_DIR.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
root=${TERN_SOURCE_ROOT:?TERN_SOURCE_ROOT is not set}
vocab=${TERN_VOCAB_DIR:?TERN_VOCAB_DIR is not set}
tmp=${TERN_TEST_TMP:-/tmp}/llamacpp-compare.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
export TERN_CLI=$cli TERN_TEST_TMP=$tmp
fake=$root/tests/data/fake-node-llama-cpp
failures=0
checks=0

check() { # DESCRIPTION EXPECTED ACTUAL
    checks=$((checks + 1))
    if [ "$2" = "$3" ]; then
        printf 'ok: %s\n' "$1"
    else
        failures=$((failures + 1))
        printf 'FAIL: %s: expected [%s], got [%s]\n' "$1" "$2" "$3" >&2
    fi
}

command -v node >/dev/null || { echo "node is not installed (tools/ensure-deps.sh installs it)" >&2; exit 1; }
for f in llama2/tokenizer.json gpt2/encoder.json; do
    [ -f "$vocab/$f" ] || { echo "$vocab/$f is missing (tools/fetch-vocab.sh)" >&2; exit 1; }
done

text=$tmp/text.txt
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
    printf 'The quick brown fox %d jumps over the lazy dog; naïve café, 東京.\n' "$i"
done >"$text"
N=100

# one NAME TOKENIZER_ARG BOS_EXPECTED
one() {
    name=$1 bos_expected=$3
    m=$tmp/$name.gguf
    # shellcheck disable=SC2086
    "$cli" mkmodel --arch llama --type q8_0 --embd 32 --layers 1 --heads 2 --kv-heads 1 \
        --head-dim 16 --ff 64 $2 -o "$m" >"$tmp/mk.log" 2>&1 ||
        { echo "mkmodel $name failed: $(cat "$tmp/mk.log")" >&2; exit 1; }
    "$cli" perplexity -m "$m" -f "$text" --ctx $N --chunks 1 -t 1 --dump-top1 "$tmp/t.top1" \
        >"$tmp/ppl.log" 2>&1 || { echo "perplexity $name failed: $(cat "$tmp/ppl.log")" >&2; exit 1; }
    rm -f "$tmp/log"
    FAKE_NLC_LOG=$tmp/log node "$root/tools/llamacpp-compare.mjs" --nlc "$fake" -m "$m" -t 1 \
        -p 4 -n 2 -r 1 --text "$text" --positions $N --dump "$tmp/l.top1" \
        --tokens-out "$tmp/l.tok" >"$tmp/node.log" 2>&1
    check "$name: llamacpp-compare.mjs runs" 0 $?

    # The window Tern's perplexity evaluates: the text with BOS first when
    # the vocabulary asks for it (docs/MODEL.md), as its dump records.
    want=$("$cli" tokenize -m "$m" --bos --file "$text" | tr ' ' '\n' | sed '/^$/d' | head -$N |
           tr '\n' ' ' | sed 's/ $//')
    check "$name: Tern's dump records that window" "$want" \
        "$(awk '{ print $4 }' "$tmp/t.top1" | tr '\n' ' ' | sed 's/ $//')"
    check "$name: llama.cpp's side evaluates the same ids" "$want" \
        "$(tr '\n' ' ' <"$tmp/log" 2>/dev/null | sed 's/ $//')"
    check "$name: --tokens-out is what was evaluated" "$want" "$(cat "$tmp/l.tok" 2>/dev/null)"
    check "$name: its dump records them" "$want" \
        "$(awk '{ print $5 }' "$tmp/l.top1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
    plain=$("$cli" tokenize -m "$m" --file "$text" | cut -d' ' -f1)
    case $bos_expected in
        yes) check "$name: BOS first" "$("$cli" tokenize -m "$m" --bos "")" "${want%% *}" ;;
        no) check "$name: no BOS" "$plain" "${want%% *}" ;;
    esac
    out=$("$root/tools/compare/top1-compare.sh" "$tmp/t.top1" "$tmp/l.top1" 2>&1)
    check "$name: top1-compare.sh finds the inputs identical" \
        "inputs: identical ($N positions)" "$(echo "$out" | head -1)"

    # The old mistake, replayed: llama.cpp's side without BOS. The comparison
    # must refuse it rather than count disagreements.
    if [ "$bos_expected" = yes ]; then
        "$cli" tokenize -m "$m" --file "$text" | tr ' ' '\n' | sed '/^$/d' | head -$N |
            awk '{ printf "%d 0 1.0 1.0 %s\n", NR - 1, $1 }' >"$tmp/shifted.top1"
        "$root/tools/compare/top1-compare.sh" "$tmp/t.top1" "$tmp/shifted.top1" >"$tmp/cmp.out" 2>&1
        check "$name: a dump of other ids is refused (exit 1)" 1 $?
        case $(head -1 "$tmp/cmp.out") in
            "inputs: DIFFER at position 0: "*) check "$name: ... saying where" ok ok ;;
            *) check "$name: ... saying where" "inputs: DIFFER at position 0" "$(cat "$tmp/cmp.out")" ;;
        esac
    fi
}

one synthetic "" yes
one llama2 "--tokenizer $vocab/llama2/tokenizer.json" yes
one gpt2 "--tokenizer $vocab/gpt2/encoder.json" no

# A dump in the old three-column format is refused too.
awk '{ print $1, $2, $3 }' "$tmp/t.top1" >"$tmp/old.top1"
"$root/tools/compare/top1-compare.sh" "$tmp/old.top1" "$tmp/l.top1" >/dev/null 2>&1
check "an old three-column dump is refused" 1 $?

echo "test-llamacpp-compare: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
