#!/bin/sh
# Tern against llama.cpp on Gemma 4 26B-A4B's mixture-of-experts layers
# (issue 23): teacher-forced top-1 over 600 positions and 64 greedy tokens,
# on files Tern writes (F16, Q8_0) and on the Q4_K_M that llama.cpp's
# llama-quantize makes of the F16 file. 26B-A4B's shapes (mkmodel --preset
# gemma4-26b-a4b: 2816 wide, 16 query heads, 8 KV heads of 256 on sliding
# layers and 2 of 512 on full ones with k = v, a dense feed-forward of 2112
# beside 128 experts of width 704, 8 per token, gate and up fused, window
# 1024) with the real Gemma 4 vocabulary that llama.cpp keeps in models/,
# but LAYERS layers (default 2: one sliding, one full, --swa-period 2)
# instead of 30, so that the files fit beside other work, and untied (a tied
# LM head with random weights makes the input token win by far more than
# the softcap of 30 lets through: no test at all). Uses a llama.cpp CPU
# build (static libllama, llama-quantize). Not run by the test suite.
#
# usage: tools/compare/gemma4moe-compare.sh TERN_BUILD LLAMA_CPP_DIR [THREADS] [LAYERS]
#   TERN_BUILD: a Tern build directory (cli/tern-cli, engine/libtern.a)
#   LLAMA_CPP_DIR: llama.cpp source with a CPU build in build/
# MODELS=DIR keeps the files there (written once, reused by later runs);
# FILES="f16 ..." picks Tern's files (default "f16 q8_0"; the F16 file is
# always written: llama-quantize reads it); NO_QUANTIZE=1 skips llama-quantize.
# Pass rule per file: no top-1 disagreement where llama.cpp's own top-2 gap
# is >= 0.5 logit; F16 also >= 99.5 % agreement overall and identical greedy
# tokens.
set -eu
tb=$(cd "$1" && pwd)
lc=$(cd "$2" && pwd)
threads=${3:-2}
layers=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}/gemma4moe-compare.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
$cc -O2 -o "$tmp/llama-top2" "$here/llama-top2.c" -I"$lc/include" -I"$lc/ggml/include" \
    "$lc/build/src/libllama.a" "$lc/build/ggml/src/libggml.a" \
    "$lc/build/ggml/src/libggml-cpu.a" "$lc/build/ggml/src/libggml-base.a" \
    -lstdc++ -lm -lpthread -fopenmp
$cc -O2 -o "$tmp/tern-top2" "$here/tern-top2.c" -I"$here/../../engine/include" -I"$tb/engine/include" \
    "$tb/engine/libtern.a" $(ls "$tb"/engine/cpu/*.a) -lm -lpthread -ldl \
    $(grep -q '"name": "xrt", "value": "enabled"' "$tb/meson-info/intro-buildoptions.json" 2>/dev/null &&
      pkg-config --libs xrt 2>/dev/null | sed 's|-L[^ ]*||g') \
    $(grep -q 'b_sanitize.*address' "$tb/meson-info/intro-buildoptions.json" 2>/dev/null &&
      echo -fsanitize=address,undefined)
quant=$lc/build/bin/llama-quantize
vocab=$lc/models/ggml-vocab-gemma-4.gguf

shape="--preset gemma4-26b-a4b --layers $layers --swa-period 2 --untied --ctx 4096
       --vocab-gguf $vocab -t $threads"
models=${MODELS:-$tmp}
mkdir -p "$models"
files=${FILES-f16 q8_0}
for t in f16 $files; do
    [ -f "$models/g4moe-$t.gguf" ] ||
        "$tb/cli/tern-cli" mkmodel $shape --type $t --seed 23 -o "$models/g4moe-$t.gguf"
done
if [ -n "${NO_QUANTIZE:-}" ]; then
    echo "NO_QUANTIZE: the Q4_K_M of llama-quantize is skipped"
elif [ -x "$quant" ]; then
    [ -f "$models/g4moe-q4_k_m-llama.gguf" ] ||
        "$quant" "$models/g4moe-f16.gguf" "$models/g4moe-q4_k_m-llama.gguf" Q4_K_M "$threads" >/dev/null 2>&1
    files="$files q4_k_m-llama"
else
    echo "no $quant: the Q4_K_M of llama-quantize is skipped"
fi

# 600 positions: BOS, then ids of ordinary tokens from a fixed generator.
awk 'BEGIN { srand(23); printf "2"; for (i = 1; i < 600; i++) printf " %d", 300 + int(rand() * 200000); print "" }' \
    >"$tmp/tokens"

echo "== machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
for f in $files; do
    m=$models/g4moe-$f.gguf
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
