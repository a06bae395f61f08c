#!/bin/sh
# tern-cli run --image through the real binary: a random-weight Gemma 3 model
# (real vocabulary) and a projector written for it by mkmodel, PNGs written by
# python3's zlib:
#   - plain -p, --single-turn and --chat answer with the image; the prompt
#     grows by exactly the image tokens the budget gives (4 -> 16);
#   - the projector is found next to the model (*mmproj*.gguf) or given;
#   - the same image and request answer the same, run after run and line
#     after line (--single-turn);
#   - bad input: a text file named .png, a header declaring 100000 x 100000
#     pixels, a FIFO and /dev/zero (refused at once), a HEIC (named), an image that does not fit the context, no or two projectors,
#     --raw: exit 2 (or 1) with one line naming the problem;
#   - a Gemma 4 projector (mkmodel --arch gemma4-vision, beside a copy of the
#     model: same width): --image-tokens picks one of its budgets and the
#     image's count follows its size (360 x 240 in 12-px tokens: 60 at 70,
#     260 at 280), --single-turn defaults to 70, plain run to 1120 (600),
#     another budget is refused naming the choices.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP, TERN_VOCAB_DIR.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
vocab=${TERN_VOCAB_DIR:-}/gemma3/tokenizer.json
tmp=${TERN_TEST_TMP:-/tmp}/image-cli.$$
mkdir -p "$tmp/model" "$tmp/two" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ ! -f "$vocab" ]; then
    echo "no gemma3 vocabulary under TERN_VOCAB_DIR" >&2
    exit 77
fi

. "$(dirname "$0")/../checks.sh"

# expect STATUS WORD ARGS...: tern-cli ARGS exits STATUS with WORD on stderr.
expect() {
    want=$1
    word=$2
    shift 2
    "$cli" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
    got=$?
    check "tern-cli $* -> $want ($(head -c 200 "$tmp/err"))" \
        sh -c "[ $got -eq $want ] && grep -q -- '$word' '$tmp/err' && [ \$(wc -l <'$tmp/err') -le 3 ]"
}

# json_field NAME FILE: the first integer value of "NAME" in a JSON line.
json_field() {
    sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2" | head -n 1
}

model=$tmp/model/gemma.gguf
"$cli" mkmodel --arch gemma3 --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --tokenizer "$vocab" -o "$model" >/dev/null 2>&1
check "mkmodel gemma3" test -f "$model"
# 128 px in 2-px patches: Gemma 3's 64 x 64 patch grid on a tiny tower.
"$cli" mkmodel --arch gemma3-vision --target "$model" --image-size 128 --patch 2 --embd 32 \
    --ff 64 --layers 1 --heads 2 -o "$tmp/model/mmproj-gemma-f32.gguf" >/dev/null 2>&1
check "mkmodel gemma3-vision" test -f "$tmp/model/mmproj-gemma-f32.gguf"

python3 - "$tmp" <<'EOF'
import struct, sys, zlib
def png(path, w, h, rows=None, declared=None):
    dw, dh = declared or (w, h)
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
    raw = b''.join(b'\0' + bytes((x * 7 + y * 3) % 256 for x in range(w * 3)) for y in range(h))
    with open(path, 'wb') as f:
        f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', dw, dh, 8, 2, 0, 0, 0))
                + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
png(sys.argv[1] + '/photo.png', 60, 40)
png(sys.argv[1] + '/wide.png', 360, 240)
png(sys.argv[1] + '/bomb.png', 16, 16, declared=(100000, 100000))
open(sys.argv[1] + '/notes.png', 'w').write('not a picture\n')
EOF
img=$tmp/photo.png

# Plain -p, projector found beside the model; the budget changes the prompt by
# exactly the image tokens (4 -> 2 x 2 = 4, 16 -> 4 x 4 = 16).
"$cli" run -m "$model" -p "What is this?" --image "$img" --image-tokens 4 -n 6 --seed 1 --json \
    >"$tmp/a4.json" 2>"$tmp/a4.err"
check "run --image (budget 4) exits 0 ($(head -c 200 "$tmp/a4.err"))" test $? -eq 0
"$cli" run -m "$model" -p "What is this?" --image "$img" --image-tokens 16 -n 6 --seed 1 \
    --json --mmproj "$tmp/model/mmproj-gemma-f32.gguf" >"$tmp/a16.json" 2>/dev/null
p4=$(json_field prompt_tokens "$tmp/a4.json")
p16=$(json_field prompt_tokens "$tmp/a16.json")
check "prompt tokens grow by 12 from budget 4 to 16 ($p4 -> $p16)" \
    sh -c "[ -n '$p4' ] && [ -n '$p16' ] && [ \$(($p16 - $p4)) -eq 12 ]"
"$cli" run -m "$model" -p "What is this?" --image "$img" --image-tokens 4 -n 6 --seed 1 --json \
    >"$tmp/a4b.json" 2>/dev/null
check "the same image and request answer the same" \
    sh -c "[ \"\$(sed 's/\"stats\".*//' '$tmp/a4.json')\" = \"\$(sed 's/\"stats\".*//' '$tmp/a4b.json')\" ]"

# --single-turn: every line asks about the image; equal lines, equal answers.
printf 'Describe it.\nDescribe it.\n' |
    "$cli" run --single-turn -m "$model" -s "You look at pictures." --image "$img" \
        --image-tokens 4 -n 6 --json --no-pin-cache >"$tmp/st.json" 2>"$tmp/st.err"
check "--single-turn --image exits 0 ($(head -c 200 "$tmp/st.err"))" test $? -eq 0
check "--single-turn: two answers" test "$(wc -l <"$tmp/st.json")" -eq 2
answer1=$(sed -n '1s/.*"answer":\("[^"]*"\).*/\1/p' "$tmp/st.json")
answer2=$(sed -n '2s/.*"answer":\("[^"]*"\).*/\1/p' "$tmp/st.json")
check "--single-turn: equal lines, equal answers ($answer1)" \
    sh -c "[ -n '$answer1' ] && [ '$answer1' = '$answer2' ]"

# --chat: the image stays in the first turn; the second turn reuses it.
printf 'What is this?\nAnd now?\n' |
    "$cli" run --chat -m "$model" --image "$img" --image-tokens 4 -n 6 --json \
        --no-pin-cache >"$tmp/chat.json" 2>"$tmp/chat.err"
check "--chat --image exits 0 ($(head -c 200 "$tmp/chat.err"))" test $? -eq 0
r2=$(sed -n 2p "$tmp/chat.json" | sed -n 's/.*"restored_tokens":\([0-9]*\).*/\1/p')
check "--chat: turn 2 reuses the image rows (restored $r2)" sh -c "[ -n '$r2' ] && [ '$r2' -gt 10 ]"

# Bad input.
expect 2 "not an image" run -m "$model" -p hi --image "$tmp/notes.png"
check "the projector beside the model is named" grep -q "mmproj-gemma-f32.gguf" "$tmp/err"
expect 2 "100000 x 100000" run -m "$model" -p hi --image "$tmp/bomb.png"
expect 2 "256 of them for 1 image" run --single-turn -m "$model" -s sys --image "$img" -c 260 \
    -p hi --no-pin-cache -q
# Images that could never fit are refused before any is encoded (8 of them
# took 20 s to encode under ASan, and then the session refused them).
expect 2 "the images take 2048 tokens; the context holds 300" run -m "$model" -p hi -c 300 \
    --image "$img" --image "$img" --image "$img" --image "$img" --image "$img" --image "$img" \
    --image "$img" --image "$img"
check "images that cannot fit are not encoded" sh -c "! grep -q 'encoded in' '$tmp/err'"
expect 2 "the images take 256 tokens; the context holds 100" run --single-turn -m "$model" \
    -s sys --image "$img" -c 100 -p hi --no-pin-cache -q
expect 2 "No such" run -m "$model" -p hi --image "$tmp/missing.png"
# A FIFO or a device given as the image: refused at once, never read (a
# read would wait for a writer, or never end). A HEIC is named as such.
mkfifo "$tmp/pipe.png"
expect 2 "pipe.png: not a regular file" run -m "$model" -p hi --image "$tmp/pipe.png"
expect 2 "/dev/zero: not a regular file" run -m "$model" -p hi --image /dev/zero
printf '\000\000\000\030ftypheic\000\000\000\000mif1heic' >"$tmp/photo.heic"
expect 2 "this one is HEIC" run -m "$model" -p hi --image "$tmp/photo.heic"
cp "$model" "$tmp/two/gemma.gguf"
expect 2 "mmproj" run -m "$tmp/two/gemma.gguf" -p hi --image "$img"
cp "$tmp/model/mmproj-gemma-f32.gguf" "$tmp/two/mmproj-a.gguf"
cp "$tmp/model/mmproj-gemma-f32.gguf" "$tmp/two/mmproj-b.gguf"
expect 2 "choose one" run -m "$tmp/two/gemma.gguf" -p hi --image "$img"
expect 1 "raw" run -m "$model" -p hi --image "$img" --raw
# A model that takes no images (a Llama vocabulary: no image tokens), with a
# projector of its width beside it: refused before any image is read, so a
# file that is no picture, or a large one, draws that refusal and no decoding
# (the images were decoded and encoded first, and the session refused them).
mkdir -p "$tmp/text"
"$cli" mkmodel --arch llama --type q8_0 --embd 64 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --tokenizer "${TERN_VOCAB_DIR:-}/llama2/tokenizer.json" \
    -o "$tmp/text/llama.gguf" >/dev/null 2>&1
"$cli" mkmodel --arch gemma3-vision --target "$tmp/text/llama.gguf" --image-size 128 --patch 2 \
    --embd 32 --ff 64 --layers 1 --heads 2 -o "$tmp/text/mmproj-llama.gguf" >/dev/null 2>&1
check "mkmodel llama and a projector of its width" \
    sh -c "test -f '$tmp/text/llama.gguf' && test -f '$tmp/text/mmproj-llama.gguf'"
expect 2 "takes no images" run -m "$tmp/text/llama.gguf" -p hi --image "$tmp/notes.png"
expect 2 "takes no images" run -m "$tmp/text/llama.gguf" -p hi --image "$img" \
    --mmproj "$tmp/text/mmproj-llama.gguf"
check "an image for a model that takes none is not encoded" sh -c "! grep -q 'encoded in' '$tmp/err'"
expect 1 "image-tokens" run -m "$model" -p hi --image "$img" --image-tokens 0

# Gemma 4 projector.
mkdir -p "$tmp/g4"
cp "$model" "$tmp/g4/gemma.gguf"
"$cli" mkmodel --arch gemma4-vision --target "$model" --patch 4 --embd 32 --ff 48 --layers 1 \
    --heads 2 --positions 128 -o "$tmp/g4/mmproj-gemma-g4.gguf" >/dev/null 2>&1
check "mkmodel gemma4-vision" test -f "$tmp/g4/mmproj-gemma-g4.gguf"
g4=$tmp/g4/gemma.gguf
"$cli" run -m "$g4" -p "What is this?" --image "$tmp/wide.png" --image-tokens 70 -n 2 --seed 1 \
    --json >"$tmp/g70.json" 2>"$tmp/g70.err"
check "gemma4 --image-tokens 70 exits 0 ($(head -c 300 "$tmp/g70.err"))" test $? -eq 0
"$cli" run -m "$g4" -p "What is this?" --image "$tmp/wide.png" --image-tokens 280 -n 2 --seed 1 \
    --json >"$tmp/g280.json" 2>"$tmp/g280.err"
q70=$(json_field prompt_tokens "$tmp/g70.json")
q280=$(json_field prompt_tokens "$tmp/g280.json")
check "gemma4: the prompt grows by 200 from 70 to 280 ($q70 -> $q280)" \
    sh -c "[ -n '$q70' ] && [ -n '$q280' ] && [ \$(($q280 - $q70)) -eq 200 ]"
echo 'Describe it.' | "$cli" run --single-turn -m "$g4" -s "You look at pictures." \
    --image "$tmp/wide.png" -n 2 --no-pin-cache >/dev/null 2>"$tmp/gst.err"
check "gemma4 --single-turn defaults to 70: 60 tokens ($(head -c 300 "$tmp/gst.err"))" \
    grep -q -- "-> 60 tokens" "$tmp/gst.err"
"$cli" run -m "$g4" -p hi --image "$tmp/wide.png" -n 1 >/dev/null 2>"$tmp/gdef.err"
check "gemma4 plain run defaults to 1120: 600 tokens" grep -q -- "-> 600 tokens" "$tmp/gdef.err"
expect 1 "70, 140, 280, 560 or 1120" run -m "$g4" -p hi --image "$tmp/wide.png" --image-tokens 100
# Images are counted before any is encoded; Gemma 4's are unscaled, so those
# past a memory bound (here 2 x 300 MB of floats) are decoded again for the
# encoding: each still encodes, in order, and the answer comes.
python3 - "$tmp/big.png" <<'EOF2'
import struct, sys, zlib
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
w = h = 5000
raw = zlib.compress(b''.join(b'\0' + bytes([(y // 50) % 256]) * (w * 3) for y in range(h)), 9)
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
                              + chunk(b'IDAT', raw) + chunk(b'IEND', b''))
EOF2
"$cli" run -m "$g4" -p hi --image "$tmp/big.png" --image "$tmp/wide.png" --image "$tmp/big.png" \
    --image-tokens 70 -n 1 >/dev/null 2>"$tmp/gbig.err"
check "gemma4: three images, two past the kept bound, all encoded ($(head -c 300 "$tmp/gbig.err"))" \
    sh -c "grep -q 'image 1: .*big.png (5000 x 5000 png)' '$tmp/gbig.err' &&
           grep -q 'image 2: .*wide.png' '$tmp/gbig.err' &&
           grep -q 'image 3: .*big.png (5000 x 5000 png)' '$tmp/gbig.err'"

checks_done image-cli
