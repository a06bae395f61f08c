#!/bin/sh
# Tern against llama.cpp on the mixture-of-experts architectures (issue 23),
# one script with a table per architecture: teacher-forced top-1 over 600
# positions and 64 greedy tokens, on files Tern writes and on what llama.cpp's
# llama-quantize makes of Tern's F16 file. Real shapes (tern-cli mkmodel
# --preset) with LAYERS layers instead of the published count, so that the
# files fit beside other work; real vocabularies; untied LM heads. Uses a
# llama.cpp CPU build (static libllama, llama-quantize). Not run by the test
# suite.
#
#   gpt-oss    gpt-oss-20b (2880 wide, 64 query / 8 KV heads of 64, attention
#              biases and sinks, YaRN factor 32 over 4096, 32 experts of 2880
#              with biases, 4 per token, swiglu_oai, window 128 on even
#              layers), the real o200k vocabulary (VOCAB_DIR/gptoss, 200,019
#              tokens); LAYERS default 2: layer 0 sliding, layer 1 full.
#              Files: f16, mxfp4 (experts MXFP4, the rest Q8_0, as the
#              published file) and llama-quantize's MXFP4_MOE of the f16 file.
#   qwen3moe   Qwen3-30B-A3B (2048 wide, 32/4 heads of 128, 128 experts of 768,
#              8 per token), LAYERS default 4; files f16, q8_0, q4_k_m and
#              llama-quantize's Q4_K_M of the f16 file.
#   gemma4moe  Gemma 4 26B-A4B, LAYERS default 2 (one sliding, one full),
#              untied; files f16, q8_0 and llama-quantize's Q4_K_M.
#
# usage: tools/compare/moe-compare.sh ARCH TERN_BUILD LLAMA_CPP_DIR [THREADS] [LAYERS]
#   ARCH: gpt-oss | qwen3moe | gemma4moe
#   TERN_BUILD: a Tern build directory (cli/tern-cli, engine/libtern.a)
#   LLAMA_CPP_DIR: llama.cpp source with a CPU build in build/
# VOCAB_DIR (default: the build's vocab_dir, else build-vocab/) holds the
# fetched vocabularies (tools/fetch-vocab.sh); MODELS=DIR keeps the files
# there (written once, reused); FILES="..." picks Tern's files; NO_QUANTIZE=1
# skips llama-quantize; POSITIONS=N (default 600) teacher-forced positions.
# Pass rule per file: no top-1 disagreement where llama.cpp's own top-2 gap
# is >= 0.5 logit; F16 also >= 99.5 % agreement overall and identical greedy
# tokens.
# ROUTER=1 (gpt-oss, qwen3moe) also takes both engines' router logits
# (Tern's TERN_DEBUG_ROUTER, llama-top2's LLAMA_TOP2_ROUTER eval callback)
# and prints, per file, how many (layer, position) pairs route to different
# top-k experts, and at every top-1 disagreement each layer's routing: both
# engines' k chosen experts, the k-th and (k+1)-th router logits and their
# gap. KEEP=DIR keeps the per-file outputs there.
set -eu
arch=$1
tb=$(cd "$2" && pwd)
lc=$(cd "$3" && pwd)
threads=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
vocab_dir=${VOCAB_DIR:-}
if [ -z "$vocab_dir" ]; then
    vocab_dir=$(sed -n 's/.*"name": "vocab_dir", "value": "\([^"]*\)".*/\1/p' \
        "$tb/meson-info/intro-buildoptions.json" 2>/dev/null | head -n 1)
    [ -n "$vocab_dir" ] || vocab_dir=$here/../../build-vocab
fi

# The table: mkmodel shape, Tern's files, the llama-quantize type, the first
# token (BOS where the model has one) and the file prefix.
case $arch in
gpt-oss)
    layers=${5:-2}
    shape="--preset gpt-oss-20b --layers $layers --ctx 4096
           --tokenizer $vocab_dir/gptoss/tokenizer.json --vocab-size 201088"
    files=${FILES-f16 mxfp4}
    qtype=MXFP4_MOE
    first=199998 # <|startoftext|>
    # the biased logits: build_moe_ffn names them ffn_moe_probs last
    # (SOFTMAX_WEIGHT gating takes the logits as the probabilities)
    router=ffn_moe_probs topk=4
    prefix=gptoss ;;
qwen3moe)
    layers=${5:-4}
    shape="--preset qwen3-30b-a3b --layers $layers --ctx 4096
           --tokenizer $vocab_dir/qwen3/tokenizer.json"
    files=${FILES-f16 q8_0 q4_k_m}
    qtype=Q4_K_M
    first=151643
    router=ffn_moe_logits topk=8
    prefix=q3moe ;;
gemma4moe)
    layers=${5:-2}
    shape="--preset gemma4-26b-a4b --layers $layers --swa-period 2 --untied --ctx 4096
           --vocab-gguf $lc/models/ggml-vocab-gemma-4.gguf"
    files=${FILES-f16 q8_0}
    qtype=Q4_K_M
    first=2
    router= topk=0
    prefix=g4moe ;;
*)
    echo "moe-compare: unknown architecture '$arch' (gpt-oss, qwen3moe or gemma4moe)" >&2
    exit 2 ;;
esac
positions=${POSITIONS:-600}

tmp=${TMPDIR:-/tmp}/moe-compare.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
$cc -O2 -o "$tmp/llama-top2" "$here/llama-top2.c" -I"$lc/include" -I"$lc/ggml/include" \
    "$lc/build/src/libllama.a" "$lc/build/ggml/src/libggml.a" \
    "$lc/build/ggml/src/libggml-cpu.a" "$lc/build/ggml/src/libggml-base.a" \
    -lstdc++ -lm -lpthread -fopenmp
$cc -O2 -o "$tmp/tern-top2" "$here/tern-top2.c" -I"$here/../../engine/include" -I"$tb/engine/include" \
    "$tb/engine/libtern.a" $(ls "$tb"/engine/cpu/*.a) -lm -lpthread -ldl \
    $(grep -q libxrt_core "$tb/build.ninja" 2>/dev/null && echo -lxrt_core -lxrt_coreutil) \
    $(grep -q 'b_sanitize.*address' "$tb/meson-info/intro-buildoptions.json" 2>/dev/null &&
      echo -fsanitize=address,undefined)
quant=$lc/build/bin/llama-quantize

models=${MODELS:-$tmp}
mkdir -p "$models"
# the F16 file is always written: llama-quantize reads it
for t in f16 $files; do
    [ -f "$models/$prefix-$t.gguf" ] ||
        "$tb/cli/tern-cli" mkmodel $shape -t "$threads" --type $t --seed 23 \
            -o "$models/$prefix-$t.gguf"
done
if [ -n "${NO_QUANTIZE:-}" ]; then
    echo "NO_QUANTIZE: llama-quantize's $qtype is skipped"
elif [ -x "$quant" ]; then
    q=$(echo "$qtype" | tr 'A-Z' 'a-z')-llama
    [ -f "$models/$prefix-$q.gguf" ] ||
        "$quant" "$models/$prefix-f16.gguf" "$models/$prefix-$q.gguf" "$qtype" "$threads" >/dev/null 2>&1
    files="$files $q"
else
    echo "no $quant: llama-quantize's $qtype is skipped"
fi

# The first token, then ids of ordinary tokens from a fixed generator.
awk -v n="$positions" -v first="$first" \
    'BEGIN { srand(23); printf "%d", first; for (i = 1; i < n; i++) printf " %d", 300 + int(rand() * 150000); print "" }' \
    >"$tmp/tokens"

# The routings of file $1 (k = $2, positions below $3) from the router
# lines "router IL POS l0 l1 ..." of both engines: top k by logit, of equal
# ones the lower index. A top-1 disagreement with the same experts at every
# layer is not a routing flip; one where a layer's k-th and (k+1)-th
# llama.cpp router logits are near a tie, and the engines chose differently
# there, is.
router_report() {
    grep '^router ' "$tmp/tern-router.$1" >"$tmp/tr" || true
    grep '^router ' "$tmp/llama-router.$1" >"$tmp/lr" || true
    awk -v K="$2" -v P="$3" -v f="$1" '
        function rank(src,   e, r, b, used) {
            split("", used)
            for (r = 1; r <= K + 1 && r <= NF - 3; r++) {
                b = -1
                for (e = 4; e <= NF; e++)
                    if (!(e in used) && (b < 0 || $e + 0 > $b + 0)) b = e
                used[b] = 1
                ex[src, $2, $3, r] = b - 4; lv[src, $2, $3, r] = $b + 0
            }
            for (e = 4; e <= NF; e++) lo[src, $2, $3, e - 4] = $e + 0
            have[src, $2, $3] = 1; layers[$2] = 1
        }
        function set(src, il, p,   r, a, i, j, t, s) {
            for (r = 1; r <= K; r++) a[r] = ex[src, il, p, r]
            for (i = 1; i <= K; i++) for (j = i + 1; j <= K; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            s = ""; for (r = 1; r <= K; r++) s = s (r > 1 ? "," : "") a[r]
            return s
        }
        # one line per (layer, position) and engine; positions past P are the greedy steps
        FILENAME == ARGV[1] { if ($3 < P && NF > K + 4) rank(1); next }
        FILENAME == ARGV[2] { if ($3 < P && NF > K + 4) rank(2); next }
        FILENAME == ARGV[3] { if ($1 != "greedy") { t1[$1] = $2 }; next }
        $1 != "greedy" && $1 < P { l1[$1] = $2; l2[$1] = $4; lg[$1] = $3 - $5 }
        END {
            for (il in layers) for (p = 0; p < P; p++) {
                if (!have[1, il, p] || !have[2, il, p]) { missing++; continue }
                pairs++
                if (set(1, il, p) != set(2, il, p)) { diff++; dpos[p] = 1 }
            }
            nd = 0; for (p in dpos) nd++
            printf "  routing %s: %d of %d (layer, position) pairs choose different top-%d experts (%d positions)%s\n",
                   f, diff + 0, pairs + 0, K, nd, missing ? sprintf("; %d pairs missing", missing) : ""
            for (p = 0; p < P; p++) {
                if (!(p in l1) || t1[p] == l1[p]) continue
                printf "  disagreement at %d: llama.cpp %d (gap %.3f to %d), Tern %d\n", p, l1[p], lg[p], l2[p], t1[p]
                for (il = 0; il < 1000; il++) {
                    if (!have[2, il, p]) { if (il > 0 && !(il in layers)) break; continue }
                    a = ex[2, il, p, K]; b = ex[2, il, p, K + 1]
                    printf "    layer %d: llama.cpp {%s}, expert #%d %d %.4f vs #%d %d %.4f (gap %.4f); Tern {%s}, the same two %.4f vs %.4f (gap %.4f): %s\n",
                           il, set(2, il, p), K, a, lv[2, il, p, K], K + 1, b, lv[2, il, p, K + 1],
                           lv[2, il, p, K] - lv[2, il, p, K + 1], set(1, il, p), lo[1, il, p, a], lo[1, il, p, b],
                           lo[1, il, p, a] - lo[1, il, p, b], set(1, il, p) == set(2, il, p) ? "same" : "DIFFERENT"
                }
            }
        }' "$tmp/tr" "$tmp/lr" "$tmp/tern.$1" "$tmp/llama.$1"
}

echo "== $arch, $layers layers, $positions positions; machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
for f in $files; do
    m=$models/$prefix-$f.gguf
    if [ -n "${ROUTER:-}" ] && [ -n "$router" ]; then
        TERN_DEBUG_ROUTER=1 "$tmp/tern-top2" "$m" "$tmp/tokens" "$threads" 64 \
            >"$tmp/tern.$f" 2>"$tmp/tern-router.$f"
        LLAMA_TOP2_ROUTER=$router "$tmp/llama-top2" "$m" "$tmp/tokens" "$threads" 64 \
            >"$tmp/llama.$f" 2>"$tmp/llama-router.$f"
    else
        "$tmp/tern-top2" "$m" "$tmp/tokens" "$threads" 64 >"$tmp/tern.$f"
        "$tmp/llama-top2" "$m" "$tmp/tokens" "$threads" 64 2>/dev/null >"$tmp/llama.$f"
    fi
    res=$(awk -v f=$f '
        NR == FNR { if ($1 == "greedy") g1 = $0; else { t[$1] = $2; tl[$1] = $3 }; next }
        $1 == "greedy" { g2 = $0; next }
        { n++; if (t[$1] == $2) same++; else { gap = $3 - $5; if (gap >= 0.5) big++; if (gap > dg) dg = gap }
          d = tl[$1] - $3; if (d < 0) d = -d; if (d > maxd) maxd = d; sd += d }
        END { printf "%s: top-1 agreement %d/%d (%.2f %%), disagreements at a llama.cpp gap >= 0.5: %d (largest gap at a disagreement %.3f), max |top logit diff| %.4f (mean %.4f), greedy 64 %s\n",
              f, same, n, 100 * same / n, big + 0, dg, maxd, sd / n, g1 == g2 ? "identical" : "DIFFERENT";
              exit big > 0 || (f == "f16" && (same < 0.995 * n || g1 != g2)) }' \
        "$tmp/tern.$f" "$tmp/llama.$f") || fail=1
    echo "$res"
    if [ -n "${ROUTER:-}" ] && [ -n "$router" ]; then
        router_report "$f" "$topk" "$positions"
    fi
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP"
        cp "$tmp"/*."$f" "$KEEP"/
    fi
done
exit $fail
