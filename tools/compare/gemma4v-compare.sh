#!/bin/sh
# Tern against llama.cpp's mtmd on Gemma 4 vision projectors (issue 22): the
# same projector file (written by tern-cli mkmodel --arch gemma4-vision, F32
# and F16, a tiny tower and one of Gemma 4's real shapes), the same 8-bit
# pixels, several sizes and budgets. Per case: the image's token count must
# match, the embeddings within NMSE 1e-4, and the next token after the image
# prompt must agree with llama.cpp's top-1 unless llama.cpp's own top-2 gap
# is < 0.5 logit (the near-tie rule). Not run by the test suite.
#
# usage: tools/compare/gemma4v-compare.sh TERN_BUILD LLAMA_CPP_DIR [THREADS]
#   TERN_BUILD: a Tern build directory (cli/tern-cli, engine/libtern.a)
#   LLAMA_CPP_DIR: llama.cpp source with a CPU build in build/ (libmtmd.a,
#   libllama.a, ggml; the Gemma 4 vocabulary in models/)
# REAL=0 skips the real-shaped tower (slow on 2 cores); MODELS=DIR keeps the
# files there between runs.
set -eu
tb=$(cd "$1" && pwd)
lc=$(cd "$2" && pwd)
threads=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}/gemma4v-compare.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
b=$lc/build
${CXX:-c++} -O2 -std=c++17 -o "$tmp/mtmd-embd" "$here/mtmd-embd.cpp" -I"$lc/include" \
    -I"$lc/ggml/include" -I"$lc/tools/mtmd" "$b/tools/mtmd/libmtmd.a" \
    "$b/vendor/hash/libvendor-hash.a" "$b/src/libllama.a" "$b/ggml/src/libggml.a" \
    "$b/ggml/src/libggml-cpu.a" "$b/ggml/src/libggml-base.a" -lm -lpthread -fopenmp
${CC:-cc} -O2 -o "$tmp/tern-vision-embd" "$here/tern-vision-embd.c" \
    -I"$here/../../engine/include" -I"$tb/engine/include" "$tb/engine/libtern.a" \
    -lm -lpthread -ldl $(pkg-config --libs xrt 2>/dev/null || true) \
    $(grep -q 'b_sanitize.*address' "$tb/meson-info/intro-buildoptions.json" 2>/dev/null &&
      echo -fsanitize=address,undefined)
export ASAN_OPTIONS=detect_leaks=0
tern=$tb/cli/tern-cli
models=${MODELS:-$tmp}
mkdir -p "$models"
# A Gemma 4 text model 256 wide (not E2B/E4B: image spans are non-causal on
# the sliding layers, as llama.cpp decodes them) with the real vocabulary.
[ -f "$models/text.gguf" ] ||
    "$tern" mkmodel --arch gemma4 --embd 256 --layers 4 --heads 4 --kv-heads 2 --head-dim 64 \
        --head-dim-swa 64 --ff 512 --per-layer 32 --swa-period 2 --window 512 --ctx 4096 \
        --untied --vocab-gguf "$lc/models/ggml-vocab-gemma-4.gguf" --type f16 --seed 3 \
        -o "$models/text.gguf" >/dev/null
for t in f32 f16; do
    [ -f "$models/tiny-$t.gguf" ] ||
        "$tern" mkmodel --arch gemma4-vision --target "$models/text.gguf" --embd 64 --ff 128 \
            --layers 2 --heads 4 --positions 128 --type $t --seed 4 -o "$models/tiny-$t.gguf"
done
projectors="tiny-f32 tiny-f16"
if [ "${REAL:-1}" != 0 ]; then
    # Gemma 4's vision tower: width 768, 16 layers, 12 heads, ffn 3072,
    # patch 16, 10240 positions per table
    for t in f32 f16; do
        [ -f "$models/real-$t.gguf" ] ||
            "$tern" mkmodel --arch gemma4-vision --target "$models/text.gguf" --embd 768 \
                --ff 3072 --layers 16 --heads 12 --patch 16 --positions 10240 --type $t \
                --seed 4 -o "$models/real-$t.gguf"
    done
    projectors="$projectors real-f32 real-f16"
fi
# Images: smooth patterns with detail, sized to exercise downscaling (with
# the few pixels of padding the plan leaves), a wide aspect and upscaling.
python3 - "$tmp" <<'EOF'
import math, sys
def mk(w, h, name, seed):
    px = bytearray()
    for y in range(h):
        for x in range(w):
            px += bytes([int(127 + 120 * math.sin((x + seed) / 17.0) * math.cos(y / 23.0)),
                         int(127 + 120 * math.cos(x * y / 900.0 + seed)),
                         (x * 3 + y * 7 + seed * 11) % 256])
    open(f"{sys.argv[1]}/{name}.rgb", "wb").write(px)
mk(640, 480, "big", 1); mk(1000, 300, "wide", 2); mk(37, 90, "small", 3); mk(200, 130, "mid", 4)
EOF
prompt='<|turn>user
<__media__>Describe this.<turn|>
<|turn>model
'
fail=0
for p in $projectors; do
    case $p in tiny*) cases="big:640:480:70 big:640:480:280 big:640:480:1120 wide:1000:300:140
                             small:37:90:70 mid:200:130:560" ;;
               *) cases="mid:200:130:70 wide:1000:300:70" ;; esac
    for c in $cases; do
        IFS=: read -r img w h budget <<EOF2
$c
EOF2
        "$tmp/mtmd-embd" "$models/text.gguf" "$models/$p.gguf" "$tmp/$img.rgb" "$w" "$h" \
            "$budget" "$threads" "$tmp/peer.f32" "$prompt" > "$tmp/peer.txt" 2>/dev/null
        if out=$("$tmp/tern-vision-embd" "$models/text.gguf" "$models/$p.gguf" "$tmp/$img.rgb" \
                 "$w" "$h" "$budget" "$threads" "$tmp/peer.f32" "$tmp/peer.txt" 2>&1); then
            v=ok
        else
            v=FAIL
            fail=1
        fi
        echo "$p ${w}x$h budget $budget: $(echo "$out" | tr '\n' ' ')$v"
    done
done
exit $fail
