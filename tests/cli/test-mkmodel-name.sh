#!/bin/sh
# mkmodel's default general.name (docs/MKMODEL.md): the architecture, the
# shape's size and the type, so that two random models are told apart in the
# app's model list (every file was "Tern demo model (random weights)"); still
# a demo model to Tern (tn_model_is_demo: tern.random_weights, docs/MODEL.md);
# --name wins, and the file is still a demo model.
set -u
cli=${TERN_CLI:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, expected, got
    if [ "$2" = "$3" ]; then
        echo "ok: $1"
    else
        echo "FAIL: $1: expected '$2', got '$3'"
        fail=1
    fi
}
name_of() {
    "$cli" info --no-tensors "$1" | sed -n 's/^  general\.name = "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p'
}
mk() { # out, options...
    out=$1
    shift
    "$cli" mkmodel "$@" -o "$out" >"$tmp/mk.log" 2>&1 || { echo "FAIL: mkmodel $*:"; cat "$tmp/mk.log"; fail=1; }
}
# 9216 weights: q and o 32x32, k and v 32x16, three 32x64 feed-forward matrices.
mk "$tmp/a.gguf" --arch llama --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 16 --ff 64
check "a tiny llama" "Random llama 9.2K-shape (F32)" "$(name_of "$tmp/a.gguf")"
# mkmodel's default shape: 1,572,864 weights.
mk "$tmp/b.gguf" --arch llama --type q4_0
check "the default shape in Q4_0" "Random llama 1.6M-shape (Q4_0)" "$(name_of "$tmp/b.gguf")"
mk "$tmp/c.gguf" --arch qwen3 --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128
check "a qwen3 in Q8_0" "Random qwen3 74K-shape (Q8_0)" "$(name_of "$tmp/c.gguf")"
mk "$tmp/d.gguf" --arch llama --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --name "My test model"
check "--name wins" "My test model" "$(name_of "$tmp/d.gguf")"
# Still a demo model: the chat's description line says so.
out=$(printf 'hi\n' | "$cli" run -m "$tmp/a.gguf" -n 1 2>&1 >/dev/null)
case $out in
*"demo model, random weights"*) echo "ok: still a demo model" ;;
*) echo "FAIL: not taken for a demo model: $out"; fail=1 ;;
esac
# A name of the user's own: still a demo model, by tern.random_weights.
out=$(printf 'hi\n' | "$cli" run -m "$tmp/d.gguf" -n 1 2>&1 >/dev/null)
case $out in
*"demo model, random weights"*) echo "ok: --name is still a demo model" ;;
*) echo "FAIL: --name \"My test model\" not taken for a demo model: $out"; fail=1 ;;
esac
exit $fail
