#!/bin/sh
# Tern against llama.cpp on Gemma 4 (issue 18): teacher-forced top-1 over
# 1,100 positions (several sliding windows, shared-KV layers, per-layer
# inputs) and 64 greedy tokens, on files Tern writes (F16, Q8_0, Q4_0,
# Q4_K, Q4_K_M) and on the Q4_K_M that llama.cpp's llama-quantize makes of
# the F16 file. Uses a llama.cpp CPU build (static libllama, llama-quantize) and the
# real Gemma 4 vocabulary that llama.cpp keeps in models/. Not run by the
# test suite.
#
# usage: tools/compare/gemma4-compare.sh TERN_BUILD LLAMA_CPP_DIR [THREADS]
#   TERN_BUILD: a Tern build directory (cli/tern-cli, engine/libtern.a)
#   LLAMA_CPP_DIR: llama.cpp source with a CPU build in build/
# Pass rule per file: no top-1 disagreement where llama.cpp's own top-2 gap
# is >= 0.5 logit; F16 also >= 99.5 % agreement overall and identical greedy
# tokens.
set -eu
tb=$(cd "$1" && pwd)
lc=$(cd "$2" && pwd)
threads=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}/gemma4-compare.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
$cc -O2 -o "$tmp/llama-top2" "$here/llama-top2.c" -I"$lc/include" -I"$lc/ggml/include" \
    "$lc/build/src/libllama.a" "$lc/build/ggml/src/libggml.a" \
    "$lc/build/ggml/src/libggml-cpu.a" "$lc/build/ggml/src/libggml-base.a" \
    -lstdc++ -lm -lpthread -fopenmp
$cc -O2 -o "$tmp/tern-top2" "$here/tern-top2.c" -I"$here/../../engine/include" -I"$tb/engine/include" \
    "$tb/engine/libtern.a" $(ls "$tb"/engine/cpu/*.a) -lm -lpthread \
    $(grep -q libxrt_core "$tb/build.ninja" 2>/dev/null && echo -lxrt_core -lxrt_coreutil) \
    $(grep -q 'b_sanitize.*address' "$tb/meson-info/intro-buildoptions.json" 2>/dev/null &&
      echo -fsanitize=address,undefined)
quant=$lc/build/bin/llama-quantize
vocab=$lc/models/ggml-vocab-gemma-4.gguf

# 12 layers, sliding period 4 (full: 3, 7, 11), layers 8-11 share KV (with
# layers 6 and 7, which both llama.cpp's and HF's rule pick), full layers
# with twice the head size and one KV head, window 256, per-layer inputs.
# Untied: with random weights a tied LM head makes the input token win by
# ~180 logits, which the softcap of 30 flattens to 29.9999: no test at all.
shape="--arch gemma4 --embd 512 --layers 12 --heads 4 --kv-heads 2 --kv-heads-full 1
       --head-dim 256 --head-dim-swa 128 --ff 1024 --double-wide --per-layer 64
       --shared-kv 4 --swa-period 4 --window 256 --ctx 4096 --untied --vocab-gguf $vocab
       -t $threads"
# MODELS=DIR keeps the files there (written once, reused by later runs).
models=${MODELS:-$tmp}
mkdir -p "$models"
for t in f16 q8_0 q4_0 q4_K q4_k_m; do
    [ -f "$models/g4-$t.gguf" ] ||
        "$tb/cli/tern-cli" mkmodel $shape --type $t --seed 7 -o "$models/g4-$t.gguf"
done
files="f16 q8_0 q4_0 q4_K q4_k_m"
if [ -x "$quant" ]; then
    [ -f "$models/g4-q4_k_m-llama.gguf" ] ||
        "$quant" "$models/g4-f16.gguf" "$models/g4-q4_k_m-llama.gguf" Q4_K_M "$threads" >/dev/null 2>&1
    files="$files q4_k_m-llama"
else
    echo "no $quant: the Q4_K_M of llama-quantize is skipped"
fi

# 1,100 positions: BOS, then ids of ordinary tokens from a fixed generator.
awk 'BEGIN { srand(18); printf "2"; for (i = 1; i < 1100; i++) printf " %d", 300 + int(rand() * 200000); print "" }' \
    >"$tmp/tokens"

echo "== machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
for f in $files; do
    m=$models/g4-$f.gguf
    "$tmp/tern-top2" "$m" "$tmp/tokens" "$threads" 64 >"$tmp/tern.$f"
    "$tmp/llama-top2" "$m" "$tmp/tokens" "$threads" 64 2>/dev/null >"$tmp/llama.$f"
    res=$(awk -v f=$f '
        NR == FNR { if ($1 == "greedy") g1 = $0; else { t[$1] = $2; tl[$1] = $3 }; next }
        $1 == "greedy" { g2 = $0; next }
        { n++; if (t[$1] == $2) same++; else { gap = $3 - $5; if (gap >= 0.5) big++; if (gap > dg) dg = gap }
          d = tl[$1] - $3; if (d < 0) d = -d; if (d > maxd) maxd = d }
        END { printf "%s: top-1 agreement %d/%d (%.2f %%), disagreements at a llama.cpp gap >= 0.5: %d (largest gap at a disagreement %.3f), max |top logit diff| %.4f, greedy 64 %s\n",
              f, same, n, 100 * same / n, big + 0, dg, maxd, g1 == g2 ? "identical" : "DIFFERENT";
              exit big > 0 || (f == "f16" && (same < 0.995 * n || g1 != g2)) }' \
        "$tmp/tern.$f" "$tmp/llama.$f") || fail=1
    echo "$res"
done
exit $fail
