#!/bin/sh
# tern-cli given files that are not usable models: a missing file, a
# directory, an empty file, a non-GGUF file, truncated GGUF files and
# hostile ones. Each must give exit status exactly 2, exactly one line on
# stderr naming the file and the problem, nothing on stdout, and no
# sanitizer report. A valid file must still work (so the test can fail).
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP,
# TERN_SOURCE_ROOT.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
root=${TERN_SOURCE_ROOT:?TERN_SOURCE_ROOT is not set}
tmp=${TERN_TEST_TMP:-/tmp}/bad-input.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# Commands that take a model file. @FILE@ stands for the bad file.
# When `tern-cli run` exists, add its line here, e.g.
#   run -m @FILE@ -p hello
# and every case below is checked for it too.
commands='info @FILE@
info --no-tensors @FILE@
run -m @FILE@ -p hello
perplexity -m @FILE@ -f /dev/null
tokenize -m @FILE@ hello
detokenize -m @FILE@ 1'

seed="$root/tests/fuzz/corpus/gguf/model-small.gguf"
failures=0
checks=0

fail() {
    failures=$((failures + 1))
    printf 'FAIL: %s\n' "$*" >&2
}

# run_cmd TEMPLATE FILE: runs tern-cli with @FILE@ replaced; leaves the exit
# status in $status and the output in $tmp/out, $tmp/err. (sh has no local
# variables: the names here are run_cmd's own.)
run_cmd() {
    rc_template=$1
    rc_file=$2
    set --
    for rc_arg in $rc_template; do
        if [ "$rc_arg" = "@FILE@" ]; then
            set -- "$@" "$rc_file"
        else
            set -- "$@" "$rc_arg"
        fi
    done
    "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
}

# expect_bad DESCRIPTION FILE WORD: WORD must appear in the error line.
expect_bad() {
    what=$1
    file=$2
    word=$3
    printf '%s\n' "$commands" | while IFS= read -r template; do
        [ -n "$template" ] || continue
        run_cmd "$template" "$file"
        label="tern-cli $template ($what)"
        lines=$(wc -l <"$tmp/err")
        msg=$(cat "$tmp/err")
        ok=1
        [ "$status" -eq 2 ] || { fail "$label: exit status $status, expected 2"; ok=0; }
        [ -s "$tmp/out" ] && { fail "$label: wrote to stdout: $(head -c 200 "$tmp/out")"; ok=0; }
        [ "$lines" -eq 1 ] || { fail "$label: $lines lines on stderr, expected 1: $msg"; ok=0; }
        case $msg in
            *"$file"*) ;;
            *) fail "$label: message does not name the file: $msg"; ok=0 ;;
        esac
        case $msg in
            *"$word"*) ;;
            *) fail "$label: message lacks '$word': $msg"; ok=0 ;;
        esac
        if grep -q -e 'Sanitizer' -e 'runtime error' "$tmp/err"; then
            fail "$label: sanitizer report"
            ok=0
        fi
        [ $ok -eq 1 ] && printf 'ok: %s: %s\n' "$label" "$msg"
        # the subshell of the pipe cannot update the parent's counters
        [ $ok -eq 1 ] || echo x >>"$tmp/failed"
    done
    checks=$((checks + 1))
}

# Writes the bytes given as \0ooo octal escapes (POSIX printf %b) to a file.
bytes() {
    out=$1
    shift
    printf '%b' "$@" >"$out"
}

# little-endian u32 and u64 as printf %b escapes (shell arithmetic is 64-bit:
# -1 gives the all-ones u64)
le32() { printf '\\0%03o\\0%03o\\0%03o\\0%03o' $(($1 & 255)) $((($1 >> 8) & 255)) \
    $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
le64() { printf '%s%s' "$(le32 $(($1 & 4294967295)))" "$(le32 $((($1 >> 32) & 4294967295)))"; }
u64_max=$(le64 -1)
u64_zero=$(le64 0)
hdr_v3="GGUF$(le32 3)"

if [ ! -f "$seed" ]; then
    echo "missing seed model $seed" >&2
    exit 1
fi
size=$(wc -c <"$seed")

# The valid file works: exit 0, no stderr.
"$cli" info "$seed" >"$tmp/out" 2>"$tmp/err"
status=$?
[ "$status" -eq 0 ] || fail "tern-cli info on a valid file: exit $status: $(cat "$tmp/err")"
[ -s "$tmp/err" ] && fail "tern-cli info on a valid file wrote to stderr: $(cat "$tmp/err")"

expect_bad "missing file" "$tmp/no-such-model.gguf" "No such file"
mkdir "$tmp/a-directory.gguf"
expect_bad "directory" "$tmp/a-directory.gguf" "directory"
: >"$tmp/empty.gguf"
expect_bad "empty file" "$tmp/empty.gguf" "empty"
printf 'this is not a model\n' >"$tmp/text.gguf"
expect_bad "text file" "$tmp/text.gguf" "not a GGUF file"
printf 'GGML' >"$tmp/ggml.bin"
expect_bad "older ggml magic" "$tmp/ggml.bin" "not a GGUF file"
mkfifo "$tmp/fifo.gguf" 2>/dev/null && expect_bad "fifo" "$tmp/fifo.gguf" "not a regular file"
# A bare name that is there but cannot be followed is a file, not a tag:
# the error is the system's, never "neither a file nor an installed model".
ln -s loop-b "$tmp/loop-a" && ln -s loop-a "$tmp/loop-b"
ln -s no-such-target "$tmp/dangling"
cd "$tmp" || exit 1
expect_bad "symlink loop" "loop-a" "Too many levels of symbolic links"
expect_bad "dangling symlink" "dangling" "No such file"
cd - >/dev/null || exit 1
if grep -q "neither a file" "$tmp/err"; then
    fail "a symlink that cannot be followed is taken for a tag: $(cat "$tmp/err")"
fi

# truncated copies of a valid model, cut in the header, the metadata, the
# tensor infos and the tensor data
for cut in 2 10 30 200 $((size / 2)) $((size - 40)); do
    head -c "$cut" "$seed" >"$tmp/cut-$cut.gguf"
    case $cut in
        2 | 10) word="header" ;;
        *) word="" ;;
    esac
    expect_bad "cut to $cut bytes" "$tmp/cut-$cut.gguf" "$word"
done
expect_bad "cut in the tensor data" "$tmp/cut-$((size - 40)).gguf" "ends past the end of the file"

# hostile headers
bytes "$tmp/huge-tensors.gguf" "$hdr_v3" "$u64_max" "$u64_zero"
expect_bad "2^64-1 tensors" "$tmp/huge-tensors.gguf" "tensors"
bytes "$tmp/huge-kv.gguf" "$hdr_v3" "$u64_zero" "$u64_max"
expect_bad "2^64-1 metadata entries" "$tmp/huge-kv.gguf" "metadata"
bytes "$tmp/version.gguf" "GGUF$(le32 7)" "$u64_zero" "$u64_zero"
expect_bad "unknown version" "$tmp/version.gguf" "version 7"
# one key whose string length is 2^64-1
bytes "$tmp/huge-key.gguf" "$hdr_v3" "$u64_zero" "$(le64 1)" "$u64_max" "padding-padding-"
expect_bad "key longer than the file" "$tmp/huge-key.gguf" "string"
# one tensor of [2^32, 2^32] f32 values: the element count overflows
bytes "$tmp/overflow.gguf" "$hdr_v3" "$(le64 1)" "$u64_zero" "$(le64 1)" "w" "$(le32 2)" \
    "$(le64 4294967296)" "$(le64 4294967296)" "$(le32 0)" "$u64_zero" "$u64_zero$u64_zero"
expect_bad "dimension product overflow" "$tmp/overflow.gguf" "overflows"
# an array of 2^64-1 strings
bytes "$tmp/huge-array.gguf" "$hdr_v3" "$u64_zero" "$(le64 1)" "$(le64 1)" "k" "$(le32 9)" \
    "$(le32 8)" "$u64_max" "$u64_zero"
expect_bad "array of 2^64-1 strings" "$tmp/huge-array.gguf" "cannot fit"
# A file name with a space and a quote is named as given.
cp "$tmp/huge-kv.gguf" "$tmp/it's a model.gguf"
expect_bad "awkward file name" "$tmp/it's a model.gguf" "metadata"

# A compute backend this build does not have (TERN_BACKEND chooses when the
# caller does not; docs/BACKENDS.md): the load fails, one line listing the
# backends there are, nothing on stdout.
for backend in xyz CPU "cpu,xrt" "$(printf 'x\001\377y')"; do
    TERN_BACKEND=$backend "$cli" run -m "$seed" -p hello >"$tmp/out" 2>"$tmp/err"
    status=$?
    checks=$((checks + 1))
    msg=$(cat "$tmp/err")
    if [ "$status" -ne 2 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
        ! grep -q "unknown compute backend .*(known: auto, cpu" "$tmp/err" ||
        grep -q -e 'Sanitizer' -e 'runtime error' "$tmp/err"; then
        fail "TERN_BACKEND=$backend tern-cli run: exit $status: $msg"
    else
        printf 'ok: TERN_BACKEND=%s tern-cli run: %s\n' "$backend" "$msg"
    fi
done

# The NPU backend asked for by name: it refuses (no kernels ship, or no
# device, or no XRT in this build), says why on one line, and the answer
# comes from the CPU, the same as without it.
"$cli" mkmodel --arch qwen3 --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    -o "$tmp/runnable.gguf" >/dev/null 2>&1
"$cli" run -m "$tmp/runnable.gguf" -p hello -n 4 --raw >"$tmp/cpu-out" 2>/dev/null
TERN_BACKEND=xrt "$cli" run -m "$tmp/runnable.gguf" -p hello -n 4 --raw >"$tmp/out" 2>"$tmp/err"
status=$?
checks=$((checks + 1))
if [ "$status" -ne 0 ] || ! cmp -s "$tmp/out" "$tmp/cpu-out" ||
    ! grep -q "^tern-cli: xrt: .*; using cpu$\|^xrt: .*; using cpu$" "$tmp/err" ||
    grep -q -e 'Sanitizer' -e 'runtime error' "$tmp/err"; then
    fail "TERN_BACKEND=xrt tern-cli run: exit $status: $(cat "$tmp/err")"
else
    printf 'ok: TERN_BACKEND=xrt tern-cli run: %s\n' "$(grep 'using cpu' "$tmp/err")"
fi

# Past a file size limit (ulimit -f), a write fails with EFBIG: tern-cli
# says so (exit 2, one line) and leaves no partial file, instead of being
# killed by SIGXFSZ with no word.
(ulimit -f 8 && exec "$cli" mkmodel --arch qwen3 --type q8_0 --embd 64 --layers 2 --heads 2 \
    --kv-heads 1 -o "$tmp/too-big.gguf") >"$tmp/out" 2>"$tmp/err"
status=$?
checks=$((checks + 1))
if [ "$status" -ne 2 ] || [ -e "$tmp/too-big.gguf" ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
    ! grep -q "too-big.gguf: cannot write: the file is too large for this file system" "$tmp/err"; then
    fail "tern-cli mkmodel past ulimit -f: exit $status: $(cat "$tmp/err")"
else
    printf 'ok: tern-cli mkmodel past ulimit -f: %s\n' "$(cat "$tmp/err")"
fi

# A kernel shape whose width is not whole blocks of the type: the error says
# so (it said "invalid argument").
"$cli" bench --kernels --types q4_0 --shapes 64x33 -r 1 >"$tmp/out" 2>"$tmp/err"
status=$?
checks=$((checks + 1))
if [ "$status" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
    ! grep -q "33 columns are not a multiple of 32" "$tmp/err"; then
    fail "tern-cli bench --kernels --shapes 64x33: exit $status: $(cat "$tmp/err")"
else
    printf 'ok: tern-cli bench --kernels --shapes 64x33: %s\n' "$(cat "$tmp/err")"
fi

# An argument that holds an escape sequence (ESC, BEL, DEL) comes back in
# the error with those bytes as '?': a pasted or hostile value must not
# recolour or rewrite the terminal.
esc=$(printf '\033[31mred\007\177')
"$cli" run -m "$tmp/runnable.gguf" -p hello -n "$esc" >"$tmp/out" 2>"$tmp/err"
status=$?
checks=$((checks + 1))
if [ "$status" -eq 0 ] || LC_ALL=C grep -q "$(printf '[\033\007\177]')" "$tmp/err" ||
    ! grep -q "?\[31mred??" "$tmp/err"; then
    fail "tern-cli run -n ESC...: exit $status: $(od -c "$tmp/err" | head -3)"
else
    printf 'ok: tern-cli run -n ESC...: %s\n' "$(cat "$tmp/err")"
fi

# An architecture name that is not UTF-8 (here "q", 0xff, U+009B CSI as
# 0xc2 0x9b, "n": the qwen3 model's five bytes overwritten in place) comes
# back escaped, \xff and \u009b: the message is valid UTF-8 and holds no C1
# control. It was printed raw.
cp "$tmp/runnable.gguf" "$tmp/badarch.gguf"
at=$(LC_ALL=C grep -obUa 'general.architecture' "$tmp/badarch.gguf" | head -n 1 | cut -d: -f1)
checks=$((checks + 1))
if [ -z "$at" ]; then
    fail "badarch: general.architecture not found in the model"
else
    # key (20 bytes), type (u32), value length (u64), then the value
    printf 'q\377\302\233n' | dd of="$tmp/badarch.gguf" bs=1 seek=$((at + 20 + 4 + 8)) \
        conv=notrunc 2>/dev/null
    "$cli" run -m "$tmp/badarch.gguf" -p hello -n 1 >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "$status" -ne 2 ] || LC_ALL=C grep -q "$(printf '[\200-\377]')" "$tmp/err" ||
        ! grep -qF "'q\xff\u009bn'" "$tmp/err"; then
        fail "badarch: exit $status: $(od -c "$tmp/err" | head -5)"
    else
        printf 'ok: tern-cli run, an architecture that is not UTF-8: %s\n' "$(cat "$tmp/err")"
    fi
fi

# Output that cannot be written (a full disk: /dev/full) fails the command,
# exit 2 and one line saying so; it was dropped and the exit status was 0, so
# `tern-cli run -p ... > answer.txt` on a full disk left a cut answer that a
# script took for the whole.
# A closed standard output (>&-) is the same. template checked its own
# flush and exited 2 without a word.
if [ -c /dev/full ]; then
    for args in "info $seed" "tokenize -m $tmp/runnable.gguf hello" \
        "run -m $tmp/runnable.gguf -p hello -n 4 --raw --json" "--version" \
        "template -m $tmp/runnable.gguf --kind gemma3 --user hello" \
        "detokenize -m $tmp/runnable.gguf 5 6"; do
        for closed in no yes; do
            checks=$((checks + 1))
            # shellcheck disable=SC2086 # the words of args, split on purpose
            if [ "$closed" = yes ]; then
                "$cli" $args >&- 2>"$tmp/err"
            else
                "$cli" $args >/dev/full 2>"$tmp/err"
            fi
            status=$?
            if [ "$status" -ne 2 ] || [ "$(grep -c . "$tmp/err")" -ne 1 ] ||
                ! grep -q "cannot write the standard output.*the output is incomplete" "$tmp/err"; then
                fail "tern-cli $args (stdout closed: $closed): exit $status: $(cat "$tmp/err")"
            else
                printf 'ok: tern-cli %s (stdout closed: %s): %s\n' "$args" "$closed" "$(cat "$tmp/err")"
            fi
        done
    done
else
    echo "note: no /dev/full; output write errors not checked"
fi

# An answer streams, and the first piece that cannot be written ends it,
# with how far it got: run went on to generate every -n token (and a chat
# answered every line) for an output no one received, and said so only at
# the end. Each mode here writes to a terminal or a file as it goes.
if [ -c /dev/full ]; then
    "$cli" run -m "$tmp/runnable.gguf" -p hello -n 64 --raw >/dev/null 2>"$tmp/err"
    full=$(sed -n 's/.*generated \([0-9]*\) tokens.*/\1/p' "$tmp/err")
    checks=$((checks + 1))
    if [ -z "$full" ] || [ "$full" -lt 8 ]; then
        fail "run --raw -n 64 to /dev/null generated '$full' tokens, too few to tell: $(cat "$tmp/err")"
        full=0
    fi
    for mode in raw prompt chat single-turn single-chat; do
        checks=$((checks + 1))
        case $mode in
        raw) "$cli" run -m "$tmp/runnable.gguf" -p hello -n 64 --raw >/dev/full 2>"$tmp/err" ;;
        prompt) "$cli" run -m "$tmp/runnable.gguf" -p hello -n 64 >/dev/full 2>"$tmp/err" ;;
        chat) printf 'hello\nagain\n' |
            "$cli" run -m "$tmp/runnable.gguf" -n 64 >/dev/full 2>"$tmp/err" ;;
        single-turn) "$cli" run --single-turn -m "$tmp/runnable.gguf" -p hello -n 64 \
            --no-pin-cache -q >/dev/full 2>"$tmp/err" ;;
        single-chat) printf 'hello\nagain\n' | "$cli" run --chat -m "$tmp/runnable.gguf" \
            -n 64 --no-pin-cache -q >/dev/full 2>"$tmp/err" ;;
        esac
        status=$?
        got=$(sed -n 's/.*the answer stopped at token \([0-9]*\).*/\1/p' "$tmp/err")
        if [ "$status" -ne 2 ] || [ "$(grep -c 'cannot write the standard output' "$tmp/err")" -ne 1 ] ||
            [ "$(echo "$got" | grep -c .)" -ne 1 ] || [ "$got" -gt 2 ] || [ "$got" -ge "$full" ] ||
            grep -q 'prompt.*tokens.*decode' "$tmp/err"; then
            fail "run ($mode) >/dev/full: exit $status, stopped at token '$got' of $full: $(cat "$tmp/err")"
        else
            printf 'ok: run (%s) >/dev/full: %s\n' "$mode" "$(grep 'cannot write' "$tmp/err")"
        fi
    done
    # bench --kernels flushes each row as it is measured: a full disk ends it
    # with exit 2 and one line.
    checks=$((checks + 1))
    "$cli" bench --kernels --types f32 --shapes 64x64 --batch 2,4 -r 1 -t 1 >/dev/full 2>"$tmp/err"
    status=$?
    if [ "$status" -ne 2 ] || [ "$(grep -c . "$tmp/err")" -ne 1 ] ||
        ! grep -q "cannot write the standard output: No space left on device" "$tmp/err"; then
        fail "bench --kernels >/dev/full: exit $status: $(cat "$tmp/err")"
    else
        printf 'ok: bench --kernels >/dev/full: %s\n' "$(cat "$tmp/err")"
    fi
fi

# --seed is a non-negative integer: "-1" was taken (strtoull made it
# 2^64-1), and so was " 5".
for seed_arg in -1 " 5"; do
    checks=$((checks + 1))
    "$cli" run -m "$tmp/runnable.gguf" -p hello -n 1 --seed "$seed_arg" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "$status" -ne 1 ] || ! grep -q "needs a non-negative integer" "$tmp/err"; then
        fail "tern-cli run --seed '$seed_arg': exit $status: $(cat "$tmp/err")"
    else
        printf 'ok: tern-cli run --seed %s: %s\n' "'$seed_arg'" "$(cat "$tmp/err")"
    fi
done

# A read error on standard input (here a directory: EISDIR) is not the end
# of the input: --raw answered an empty prompt, the chat and --single-turn
# ended without a word, all with exit status 0.
mkdir -p "$tmp/stdin-dir"
for args in "run -m $tmp/runnable.gguf -n 2 --raw" "run -m $tmp/runnable.gguf -n 2" \
    "run --single-turn -m $tmp/runnable.gguf -s hi -n 2 --no-pin-cache -q"; do
    checks=$((checks + 1))
    # shellcheck disable=SC2086 # the words of args, split on purpose
    "$cli" $args <"$tmp/stdin-dir" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "$status" -ne 2 ] || [ -s "$tmp/out" ] ||
        ! grep -q "cannot read the standard input: Is a directory" "$tmp/err"; then
        fail "tern-cli $args <DIR: exit $status: $(cat "$tmp/out" "$tmp/err")"
    else
        printf 'ok: tern-cli %s <DIR: %s\n' "$args" "$(grep 'cannot read' "$tmp/err")"
    fi
done

if [ -f "$tmp/failed" ]; then
    failures=$((failures + $(wc -l <"$tmp/failed")))
fi
echo "cli-bad-input: $checks cases, $failures failed"
[ "$failures" -eq 0 ]
