#!/bin/sh
# Tern against llama.cpp on qwen3moe (issue 23): teacher-forced top-1 over
# 600 positions and 64 greedy tokens, on files Tern writes (F16, Q8_0,
# Q4_K_M) and on the Q4_K_M that llama.cpp's llama-quantize makes of the
# F16 file. Qwen3-30B-A3B's shapes (mkmodel --preset qwen3-30b-a3b: 2048
# wide, 32 query / 4 KV heads of 128, 128 experts of width 768, 8 per
# token, untied) with the real Qwen3 vocabulary, but LAYERS layers (default
# 4) instead of 48, so that the files fit beside other work. Uses a
# llama.cpp CPU build (static libllama, llama-quantize). Not run by the test
# suite.
#
# usage: tools/compare/qwen3moe-compare.sh TERN_BUILD LLAMA_CPP_DIR VOCAB_DIR [THREADS] [LAYERS]
#   VOCAB_DIR: holds qwen3/tokenizer.json (meson's vocab_dir)
#   TERN_BUILD: a Tern build directory (cli/tern-cli, engine/libtern.a)
#   LLAMA_CPP_DIR: llama.cpp source with a CPU build in build/
# Pass rule per file: no top-1 disagreement where llama.cpp's own top-2 gap
# is >= 0.5 logit; F16 also >= 99.5 % agreement overall and identical greedy
# tokens.
set -eu
tb=$(cd "$1" && pwd)
lc=$(cd "$2" && pwd)
vocab=$(cd "$3" && pwd)/qwen3/tokenizer.json
threads=${4:-2}
layers=${5:-4}
here=$(cd "$(dirname "$0")" && pwd)
tmp=${TMPDIR:-/tmp}/qwen3moe-compare.$$
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

shape="--preset qwen3-30b-a3b --layers $layers --ctx 4096 --tokenizer $vocab -t $threads"
# MODELS=DIR keeps the files there (written once, reused by later runs);
# NO_QUANTIZE=1 compares Tern's files only; FILES="f16 ..." (or FILES= with
# the llama-quantize file alone) picks Tern's files.
models=${MODELS:-$tmp}
mkdir -p "$models"
files=${FILES-f16 q8_0 q4_k_m}
for t in $files; do
    [ -f "$models/q3moe-$t.gguf" ] ||
        "$tb/cli/tern-cli" mkmodel $shape --type $t --seed 23 -o "$models/q3moe-$t.gguf"
done
if [ -n "${NO_QUANTIZE:-}" ]; then
    echo "NO_QUANTIZE: the Q4_K_M of llama-quantize is skipped"
elif [ -x "$quant" ]; then
    [ -f "$models/q3moe-q4_k_m-llama.gguf" ] ||
        "$quant" "$models/q3moe-f16.gguf" "$models/q3moe-q4_k_m-llama.gguf" Q4_K_M "$threads" >/dev/null 2>&1
    files="$files q4_k_m-llama"
else
    echo "no $quant: the Q4_K_M of llama-quantize is skipped"
fi

# 600 positions: ids of ordinary tokens from a fixed generator (Qwen3 has
# no BOS).
awk 'BEGIN { srand(23); printf "%d", 300 + int(rand() * 150000); for (i = 1; i < 600; i++) printf " %d", 300 + int(rand() * 150000); print "" }' \
    >"$tmp/tokens"

echo "== machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
for f in $files; do
    m=$models/q3moe-$f.gguf
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
