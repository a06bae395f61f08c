#!/bin/sh
# tern-cli tokenize / detokenize through the real binary: output formats,
# round trip, special tokens, --bench, and exit statuses (1 usage, 2 bad
# input). Uses a tiny model with the synthetic vocabulary (no files needed)
# and, when fetched, the real Qwen3 vocabulary.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP,
# TERN_VOCAB_DIR.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
tmp=${TERN_TEST_TMP:-/tmp}/tokenize.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
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

# status COMMAND...: runs it, prints the exit status only.
status() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    echo $?
}

model=$tmp/tiny.gguf
"$cli" mkmodel --arch llama --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 16 --ff 64 -o "$model" >"$tmp/mk.log" 2>&1 ||
    { echo "mkmodel failed: $(cat "$tmp/mk.log")" >&2; exit 1; }

# Round trip through both commands.
ids=$("$cli" tokenize -m "$model" "hello world, again")
check "tokenize prints ids" 0 $?
text=$("$cli" detokenize -m "$model" $ids)
check "detokenize gives the text back" "hello world, again" "$text"
json=$("$cli" tokenize -m "$model" --json "hello world, again")
check "--json is the same ids as an array" "[$(echo "$ids" | sed 's/ /, /g')]" "$json"
text=$("$cli" detokenize -m "$model" "$json")
check "detokenize reads the JSON array" "hello world, again" "$text"
n_pieces=$("$cli" tokenize -m "$model" --pieces "hello world, again" | wc -l)
check "--pieces prints one line per token" "$(echo "$ids" | wc -w)" "$n_pieces"
printf 'from a file\n' >"$tmp/in.txt"
text=$("$cli" detokenize -m "$model" $("$cli" tokenize -m "$model" --file "$tmp/in.txt"))
check "--file" "from a file" "$text"

# BOS: first with --bos, rendered only with --special.
bos_ids=$("$cli" tokenize -m "$model" --bos "hi")
first=${bos_ids%% *}
check "--bos starts with BOS" "$first $("$cli" tokenize -m "$model" hi)" "$bos_ids"
check "BOS renders as nothing" "hi" "$("$cli" detokenize -m "$model" $bos_ids)"
case $("$cli" detokenize -m "$model" --special $bos_ids) in
    "<"*"hi") check "--special renders BOS" ok ok ;;
    *) check "--special renders BOS" "<...>hi" "$("$cli" detokenize -m "$model" --special $bos_ids)" ;;
esac

# --bench prints a throughput line.
head -c 20000 /dev/zero | tr '\0' 'a' >"$tmp/bench.txt"
"$cli" tokenize -m "$model" --bench "$tmp/bench.txt" --seconds 0 >"$tmp/out" 2>"$tmp/err"
check "--bench exit status" 0 $?
grep -q 'MB/s' "$tmp/out"
check "--bench reports MB/s" 0 $?

# Exit statuses.
check "no -m is a usage error" 1 "$(status "$cli" tokenize hello)"
check "no text is a usage error" 1 "$(status "$cli" tokenize -m "$model")"
check "unknown option" 1 "$(status "$cli" tokenize -m "$model" --nope x)"
check "missing model" 2 "$(status "$cli" tokenize -m "$tmp/none.gguf" x)"
grep -q "$tmp/none.gguf" "$tmp/err"
check "the message names the file" 0 $?
check "id outside the vocabulary" 2 "$(status "$cli" detokenize -m "$model" 99999999)"
check "negative id" 2 "$(status "$cli" detokenize -m "$model" -3)"
check "not an id" 2 "$(status "$cli" detokenize -m "$model" 12abc)"
check "missing text file" 2 "$(status "$cli" tokenize -m "$model" --file "$tmp/none.txt")"
check "--help" 0 "$(status "$cli" tokenize --help)"
check "detokenize --help" 0 "$(status "$cli" detokenize --help)"

# A real vocabulary: control tokens only with --special.
vocab=${TERN_VOCAB_DIR:-}
if [ -n "$vocab" ] && [ -f "$vocab/qwen3/tokenizer.json" ]; then
    qwen=$tmp/qwen3.gguf
    "$cli" mkmodel --arch qwen3 --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 \
        --head-dim 16 --ff 64 --tokenizer "$vocab/qwen3/tokenizer.json" -o "$qwen" \
        >"$tmp/mk.log" 2>&1 || { echo "mkmodel qwen3 failed: $(cat "$tmp/mk.log")" >&2; exit 1; }
    check "qwen3: <|im_start|>user with --special" "151644 872" \
        "$("$cli" tokenize -m "$qwen" --special "<|im_start|>user")"
    plain=$("$cli" tokenize -m "$qwen" "<|im_start|>user")
    case " $plain " in
        *" 151644 "*) check "qwen3: plain text without --special" "no 151644" "$plain" ;;
        *) check "qwen3: plain text without --special" ok ok ;;
    esac
    check "qwen3: Hello world" "9707 1879" "$("$cli" tokenize -m "$qwen" "Hello world")"
    check "qwen3: detokenize" "Hello world" "$("$cli" detokenize -m "$qwen" 9707 1879)"
else
    echo "qwen3 vocabulary not fetched: real-vocabulary cases skipped"
fi

echo "cli-tokenize: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
