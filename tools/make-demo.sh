#!/usr/bin/env bash
# Writes the demo model: random weights, a real Qwen3 vocabulary and chat
# template, small enough to run anywhere. It is named as a random-weight
# demo everywhere it is shown; its answers are meaningless.
# Usage: tools/make-demo.sh TERN_CLI VOCAB_DIR OUT.gguf
set -euo pipefail
cli=${1:?usage: make-demo.sh TERN_CLI VOCAB_DIR OUT}
vocab=${2:?}
out=${3:?}
if [ -f "$out" ] && [ "$out" -nt "$cli" ]; then
    exit 0
fi
mkdir -p "$(dirname "$out")"
echo "make-demo: writing $out (random weights, Qwen3 vocabulary)"
"$cli" mkmodel --arch qwen3 --type q8_0 --embd 256 --layers 4 --heads 4 --kv-heads 2 \
    --head-dim 64 --ff 768 --ctx 4096 --seed 7 \
    --tokenizer "$vocab/qwen3/tokenizer.json" \
    --name "Tern demo model (random weights)" -o "$out"
