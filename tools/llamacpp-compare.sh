#!/bin/sh
# Tern and llama.cpp side by side on the same GGUF (issue 5): pp/tg speed
# with the same thread count, and a correctness check: the same text's
# tokens, and the teacher-forced argmax and its logit at each of the first
# 64 positions. llama.cpp comes from the npm package node-llama-cpp (its
# prebuilt CPU binaries, @node-llama-cpp/linux-x64), installed under
# $NLC_DIR (default /tmp/tern-llamacpp), never into the repository.
# Not run by the test suite.
#
# usage: tools/llamacpp-compare.sh TERN_CLI MODEL.gguf [THREADS] [REPS]
#   TEXT=FILE  the text for the logit check (default: README.md)
#   POSITIONS=N  positions of the logit check (default 64)
#   SPEED=0    the correctness check only
set -eu
cli=$1
model=$2
threads=${3:-2}
reps=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
nlc=${NLC_DIR:-/tmp/tern-llamacpp}
text=${TEXT:-$here/../README.md}
positions=${POSITIONS:-64}
if [ ! -d "$nlc/node_modules/node-llama-cpp" ]; then
    mkdir -p "$nlc"
    (cd "$nlc" && npm init -y >/dev/null &&
        NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional --no-audit --no-fund \
            node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >/dev/null)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== llama.cpp"
# SPEED=0: correctness only (the speed runs shrink to a token or two)
if [ "${SPEED:-1}" = 0 ]; then set -- -p 8 -n 2 -r 1; else set -- -p 512 -n 128 -r "$reps"; fi
node "$here/llamacpp-compare.mjs" --nlc "$nlc" -m "$model" -t "$threads" "$@" \
    --text "$text" --positions "$positions" --dump "$tmp/llama.top1" \
    --tokens-out "$tmp/llama.tokens"
if [ "${SPEED:-1}" != 0 ]; then
    echo "== tern"
    "$cli" bench -m "$model" -p 512 -n 128 -t "$threads" -r "$reps" | grep -E '^(threads|pp|tg)'
fi
echo "== correctness (first $positions tokens of $(basename "$text"))"
# Both tokenizers on the text, BOS first where the vocabulary asks for it:
# the window both engines evaluate (llama.cpp's perplexity tool does the same).
"$cli" tokenize -m "$model" --bos --file "$text" | tr ' ' '\n' | sed '/^$/d' | head -"$positions" >"$tmp/tern.tokens"
tr ' ' '\n' <"$tmp/llama.tokens" | sed '/^$/d' >"$tmp/llama.tokens.1"
if cmp -s "$tmp/tern.tokens" "$tmp/llama.tokens.1"; then
    echo "tokens: identical"
else
    echo "tokens: DIFFER"
fi
"$cli" perplexity -m "$model" -f "$text" --ctx "$positions" --chunks 1 -t "$threads" \
    --dump-top1 "$tmp/tern.top1" >/dev/null 2>&1
# The ids each engine evaluated, then its argmax at each position.
"$here/compare/top1-compare.sh" "$tmp/tern.top1" "$tmp/llama.top1"
