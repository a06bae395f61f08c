#!/bin/sh
# A file tern-cli writes (perplexity --dump-top1, mkmodel's model) that cannot be
# written names the cause (docs/CLI.md): a full disk (/dev/full, ENOSPC) and a
# file past the size limit (ulimit -f, EFBIG) each in their own words, not a
# bare "write error"; exit status 2 either way.
set -u
cli=${TERN_CLI:?}
tmp=$(mktemp -d)
trap 'umount "$tmp/small" 2>/dev/null; rm -rf --one-file-system "$tmp"' EXIT
fail=0
expect() { # name, status, pattern, file
    if [ "$2" = 2 ] && grep -q -- "$3" "$4"; then
        echo "ok: $1"
    else
        echo "FAIL: $1: exit $2, no '$3' in:"; cat "$4"; fail=1
    fi
}
"$cli" mkmodel --arch llama --type f32 --embd 64 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 -o "$tmp/m.gguf" >"$tmp/mk.log" 2>&1 ||
    { echo "FAIL: mkmodel:"; cat "$tmp/mk.log"; exit 1; }
# mkmodel's model (the engine's GGUF writer) in the same words: past
# ulimit -f, and on a full disk (a 256 KiB tmpfs, where root can mount one).
set -- mkmodel --arch llama --type f32 --embd 64 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128
out=$( (ulimit -f 8 && exec "$cli" "$@" -o "$tmp/big.gguf") 2>&1 >/dev/null
    echo "exit $?")
printf '%s\n' "$out" >"$tmp/err"
expect "mkmodel past ulimit -f" "${out##*exit }" \
    "big.gguf: cannot write: the file is too large for this file system" "$tmp/err"
mkdir "$tmp/small"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=256k none "$tmp/small" 2>/dev/null; then
    "$cli" "$@" -o "$tmp/small/m.gguf" >/dev/null 2>"$tmp/err"
    st=$?
    umount "$tmp/small"
    expect "mkmodel on a full disk" $st "m.gguf: cannot write: the disk is full" "$tmp/err"
else
    echo "note: no tmpfs to fill (not root); mkmodel's full disk is not checked"
fi
i=0
while [ $i -lt 40 ]; do
    printf 'the quick brown fox jumps over the lazy dog %d times\n' $i
    i=$((i + 1))
done >"$tmp/text.txt"
set -- perplexity -m "$tmp/m.gguf" -f "$tmp/text.txt" --ctx 64 -t 2
if [ -c /dev/full ]; then
    "$cli" "$@" --dump-top1 /dev/full >/dev/null 2>"$tmp/err"
    expect "--dump-top1 /dev/full" $? "/dev/full: cannot write: the disk is full" "$tmp/err"
else
    echo "note: no /dev/full; the full disk is not checked"
fi
# 1 block of ulimit -f (512 or 1024 bytes) holds a few dump lines of the
# hundreds written. Standard error goes to a pipe, which the limit spares.
out=$( (ulimit -f 1 && exec "$cli" "$@" --dump-top1 "$tmp/dump.txt") 2>&1 >/dev/null
    echo "exit $?")
printf '%s\n' "$out" >"$tmp/err"
expect "--dump-top1 past ulimit -f" "${out##*exit }" \
    "dump.txt: cannot write: the file is too large for this file system" "$tmp/err"
exit $fail
