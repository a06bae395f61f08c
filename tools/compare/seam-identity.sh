#!/bin/sh
# Bitwise identity of the engine's outputs across a refactoring (issue 25's
# backend seam; docs/BACKENDS.md): record what one build answers on a fixed
# set of models and prompts, record it again with another build, compare
# byte for byte.
#
#   seam-identity.sh models CLI DIR          write the test models into DIR (once)
#   seam-identity.sh record SRC BUILD DIR OUT
#                    SRC: the source tree of BUILD (its headers), BUILD: a meson
#                    build folder with cli/tern-cli and engine/libtern.a built
#   seam-identity.sh compare OUT_A OUT_B     exit 0 when every file is the same
#
# Recorded per model: greedy `run --raw` text at 1 and 2 threads, a chat run
# as JSON tokens (stats dropped: they hold timings), `perplexity` with the
# per-position argmax and its logit, and (tools/compare/seam-logits.c) every
# logit of a 48-token prefill and 16 decode steps plus the KV snapshot, as a
# SHA-256. Also: speculative decoding with a draft model and a DFlash draft,
# an image prompt through a vision projector and its image embeddings, the scalar and AVX2 kernel
# families (TERN_ISA) and the file's row layout (TERN_REPACK=0).
set -eu

die() { echo "seam-identity: $*" >&2; exit 2; }

models() {
    cli=$1 dir=$2
    mkdir -p "$dir"
    mk() { # NAME ARCH TYPE [extra mkmodel options]
        name=$1 arch=$2 type=$3
        shift 3
        [ -s "$dir/$name.gguf" ] && return 0
        "$cli" mkmodel --arch "$arch" --type "$type" --embd 64 --layers 2 --heads 4 --kv-heads 2 \
            --head-dim 32 --ff 160 --seed 11 -t 2 "$@" -o "$dir/$name.gguf" >/dev/null
    }
    mk llama-q4_0 llama q4_0
    mk llama-f16 llama f16
    mk qwen3-q8_0 qwen3 q8_0
    mk qwen3-q4_k qwen3 q4_k_m --embd 256 --ff 512
    mk qwen3-draft qwen3 q4_0 --layers 1
    mk gemma3-q6_k gemma3 q6_K --embd 256 --ff 512 --window 16
    mk gemma4-q8_0 gemma4 q8_0 --layers 6 --heads 2 --kv-heads 1 --head-dim 64 \
        --head-dim-swa 32 --ff 128 --per-layer 32 --shared-kv 3 --swa-period 3 --window 16
    [ -s "$dir/qwen3-dflash.gguf" ] ||
        "$cli" mkmodel --arch dflash --target "$dir/qwen3-q8_0.gguf" --block-size 8 \
            -o "$dir/qwen3-dflash.gguf" >/dev/null
    vocab=${TERN_VOCAB_DIR:-}/gemma3/tokenizer.json
    if [ -f "$vocab" ]; then
        mk gemma3-vis gemma3 q8_0 --tokenizer "$vocab"
        [ -s "$dir/mmproj-gemma3-vis.gguf" ] ||
            "$cli" mkmodel --arch gemma3-vision --target "$dir/gemma3-vis.gguf" --image-size 128 \
                --patch 2 --embd 32 --ff 64 --layers 1 --heads 2 \
                -o "$dir/mmproj-gemma3-vis.gguf" >/dev/null
        python3 - "$dir/photo.png" <<'PY'
import struct, sys, zlib
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
w, h = 60, 40
raw = b''.join(b'\0' + bytes((x * 7 + y * 3) % 256 for x in range(w * 3)) for y in range(h))
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' +
    chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) +
    chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
PY
    else
        echo "seam-identity: no gemma3 vocabulary (TERN_VOCAB_DIR): no vision model" >&2
    fi
    printf 'the cat sat on the mat and the dog sat on the log, ' >"$dir/text.txt"
    i=0
    while [ $i -lt 6 ]; do cat "$dir/text.txt" "$dir/text.txt" >"$dir/t2" && mv "$dir/t2" "$dir/text.txt"; i=$((i + 1)); done
}

# digest OUT_FILE COMMAND...: the SHA-256 of the command's output; a
# command that fails stops the recording (a pipe would hide it).
digest() {
    file=$1
    shift
    "$@" >"$file.bin"
    sha256sum <"$file.bin" | cut -d' ' -f1 >"$file"
    rm -f "$file.bin"
}

record() {
    src=$1 build=$2 dir=$3 out=$4
    cli=$build/cli/tern-cli
    [ -x "$cli" ] || die "$cli: not built"
    [ -f "$build/engine/libtern.a" ] || die "$build/engine/libtern.a: not built"
    mkdir -p "$out"
    san=
    grep -q '"b_sanitize".*"address' "$build/meson-info/intro-buildoptions.json" 2>/dev/null &&
        san=-fsanitize=address,undefined
    old=
    grep -qs 'struct tn_cpu \*cpu, tn_error' "$src/engine/tern.h" && old=-DSEAM_OLD_VISION
    ${CC:-cc} -O2 -std=gnu11 $san $old -o "$out/seam-logits" "$(dirname "$0")/seam-logits.c" \
        -I"$src/engine/include" -I"$src/engine" -I"$build/engine/include" -I"$build/engine" \
        "$build/engine/libtern.a" $(ls "$build"/engine/cpu/*.a 2>/dev/null) -lm -lpthread
    prompt="the cat sat on the mat, the cat sat on the mat, the cat sat on the"
    for m in "$dir"/*.gguf; do
        name=$(basename "$m" .gguf)
        case $name in mmproj-*|qwen3-dflash) continue ;; esac
        for t in 1 2; do
            "$cli" run -m "$m" --raw -p "$prompt" -n 24 -t $t >"$out/$name.run-t$t.txt" 2>/dev/null
        done
        "$cli" run -m "$m" -p "Hello there" -n 16 -t 2 --json 2>/dev/null |
            sed 's/,"stats":.*//' >"$out/$name.chat.json"
        "$cli" perplexity -m "$m" -f "$dir/text.txt" --ctx 64 --chunks 3 -t 2 \
            --dump-top1 "$out/$name.top1.txt" >"$out/$name.ppl.txt" 2>/dev/null
        digest "$out/$name.logits.sha256" "$out/seam-logits" "$m" 2 2>"$out/$name.logits.log"
    done
    q=$dir/qwen3-q8_0.gguf
    "$cli" run -m "$q" --raw -p "$prompt" -n 32 -t 2 --spec "draft:$dir/qwen3-draft.gguf" \
        --draft-max 4 >"$out/spec-draft.txt" 2>/dev/null
    "$cli" run -m "$q" --raw -p "$prompt" -n 32 -t 2 --spec "dflash:$dir/qwen3-dflash.gguf" \
        >"$out/spec-dflash.txt" 2>/dev/null
    "$cli" run -m "$q" --raw -p "$prompt" -n 32 -t 2 --spec lookup >"$out/spec-lookup.txt" 2>/dev/null
    for isa in scalar avx2; do
        digest "$out/isa-$isa.logits.sha256" env TERN_ISA=$isa "$out/seam-logits" \
            "$dir/qwen3-q4_k.gguf" 2 2>"$out/isa-$isa.logits.log"
    done
    digest "$out/rows-layout.logits.sha256" env TERN_REPACK=0 "$out/seam-logits" \
        "$dir/gemma3-q6_k.gguf" 2 2>"$out/rows-layout.logits.log"
    if [ -f "$dir/gemma3-vis.gguf" ]; then
        "$cli" run -m "$dir/gemma3-vis.gguf" --mmproj "$dir/mmproj-gemma3-vis.gguf" \
            -p "What is this?" --image "$dir/photo.png" --image-tokens 16 -n 12 -t 2 --json \
            2>/dev/null | sed 's/,"stats":.*//' >"$out/vision.json"
        digest "$out/vision.embd.sha256" "$out/seam-logits" --vision "$dir/mmproj-gemma3-vis.gguf"
    fi
    rm -f "$out/seam-logits"
}

compare() {
    a=$1 b=$2
    n=0 bad=0
    for f in "$a"/*; do
        n=$((n + 1))
        base=$(basename "$f")
        if ! cmp -s "$f" "$b/$base"; then
            echo "DIFFERS: $base"
            bad=$((bad + 1))
        fi
    done
    for f in "$b"/*; do [ -e "$a/$(basename "$f")" ] || { echo "ONLY IN $b: $(basename "$f")"; bad=$((bad + 1)); }; done
    echo "$n files compared, $bad differ"
    [ $bad -eq 0 ]
}

case ${1:-} in
models) [ $# -eq 3 ] || die "usage: models CLI DIR"; models "$2" "$3" ;;
record) [ $# -eq 5 ] || die "usage: record SRC BUILD DIR OUT"; record "$2" "$3" "$4" "$5" ;;
compare) [ $# -eq 3 ] || die "usage: compare OUT_A OUT_B"; compare "$2" "$3" ;;
*) die "usage: seam-identity.sh models|record|compare ..." ;;
esac
