#!/bin/sh
# Every tern-cli option that reads a whole file the user names (--tools,
# --system-file, perplexity -f, tokenize --file and --bench, mkmodel
# --tokenizer), given what is not a regular file of a sane size: a FIFO
# (g_file_get_contents and fopen wait on it for ever), /dev/zero (read until
# memory runs out), a directory, and a file over the option's maximum
# (sparse: no disk used). Each must end at once with exit status 2, one line
# on stderr naming the file and the reason, and no sanitizer report; a valid
# file must still work (so that the test can fail). Each run is under
# timeout(1): a hang is reported as exit status 124, not as meson's timeout.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
tmp=${TERN_TEST_TMP:-/tmp}/file-args.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
checks=0

fail() {
    failures=$((failures + 1))
    printf 'FAIL: %s\n' "$*" >&2
}

# sparse FILE BYTES: a file of that size without its blocks.
sparse() {
    rm -f "$1"
    truncate -s "$2" "$1" || { echo "cannot make a sparse file of $2 bytes" >&2; exit 1; }
}

model=$tmp/tiny.gguf
"$cli" mkmodel --arch llama --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 16 --ff 64 -o "$model" >"$tmp/mk.log" 2>&1 ||
    { echo "mkmodel failed: $(cat "$tmp/mk.log")" >&2; exit 1; }

mkfifo "$tmp/fifo" || { echo "mkfifo failed" >&2; exit 1; }
mkdir "$tmp/a-directory"
not_regular="is not a regular file (a FIFO, a device or a directory)"
prompt_max=67108864       # CLI_MAX_PROMPT_BYTES (cli/cli.h)
corpus_max=1073741824     # CLI_MAX_CORPUS_BYTES
json_max=4294967294       # tn_json_parse_file: the parser's 32-bit offsets
sparse "$tmp/prompt-huge" $((prompt_max + 1))
sparse "$tmp/corpus-huge" $((corpus_max + 1))
sparse "$tmp/tokenizer-huge.json" $((json_max + 1))

# run_cmd TEMPLATE FILE: tern-cli with @FILE@ replaced by FILE (words of
# TEMPLATE split on spaces); exit status in $status, output in $tmp/out,
# $tmp/err.
run_cmd() {
    rc_template=$1
    rc_file=$2
    set --
    for rc_arg in $rc_template; do
        case $rc_arg in
            @FILE@) set -- "$@" "$rc_file" ;;
            @MODEL@) set -- "$@" "$model" ;;
            @OUT@) set -- "$@" "$tmp/out.gguf" ;;
            *) set -- "$@" "$rc_arg" ;;
        esac
    done
    timeout 30 "$cli" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    status=$?
}

# expect_ok TEMPLATE FILE: the valid file works.
expect_ok() {
    checks=$((checks + 1))
    run_cmd "$1" "$2"
    if [ "$status" -ne 0 ]; then
        fail "tern-cli $1 ($2): exit $status: $(head -c 400 "$tmp/err")"
    else
        printf 'ok: tern-cli %s (a valid file)\n' "$1"
    fi
}

# expect_bad TEMPLATE FILE WORDS: exit 2, one line naming FILE with WORDS.
expect_bad() {
    checks=$((checks + 1))
    run_cmd "$1" "$2"
    label="tern-cli $1 ($2)"
    msg=$(cat "$tmp/err")
    lines=$(wc -l <"$tmp/err")
    ok=1
    [ "$status" -eq 2 ] || { fail "$label: exit status $status, expected 2: $msg"; ok=0; }
    [ "$lines" -eq 1 ] || { fail "$label: $lines lines on stderr, expected 1: $msg"; ok=0; }
    case $msg in *"$2"*) ;; *) fail "$label: message does not name the file: $msg"; ok=0 ;; esac
    case $msg in *"$3"*) ;; *) fail "$label: message lacks '$3': $msg"; ok=0 ;; esac
    if grep -q -e 'Sanitizer' -e 'runtime error' "$tmp/err"; then
        fail "$label: sanitizer report"
        ok=0
    fi
    [ $ok -eq 1 ] && printf 'ok: %s: %s\n' "$label" "$msg"
}

# each TEMPLATE HUGE_FILE HUGE_WORDS: the four bad files for one option.
# The FIFO first: where it is not refused the guard is gone, and /dev/zero
# would then be read until the machine's memory ran out, so the rest of
# that option is left out.
each() {
    before=$failures
    expect_bad "$1" "$tmp/fifo" "$not_regular"
    if [ "$failures" -ne "$before" ]; then
        echo "tern-cli $1: the FIFO was not refused; /dev/zero and the rest not tried" >&2
        return
    fi
    expect_bad "$1" /dev/zero "$not_regular"
    expect_bad "$1" "$tmp/a-directory" "$not_regular"
    expect_bad "$1" "$2" "$3"
}

printf 'You are brief.\n' >"$tmp/system.txt"
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 40) >"$tmp/text.txt"

# run --single-turn --system-file
t="run -m @MODEL@ --single-turn --system-file @FILE@ -p hi -n 2"
expect_ok "$t" "$tmp/system.txt"
each "$t" "$tmp/prompt-huge" "$((prompt_max + 1)) bytes, more than the $prompt_max this takes"
# A NUL byte (here a UTF-16 file) ended the system prompt there without a
# word: "You are brief." was pinned as "Y".
printf '\377\376Y\000o\000u\000 \000a\000r\000e\000' >"$tmp/system-utf16.txt"
expect_bad "$t" "$tmp/system-utf16.txt" "contains a NUL byte"

# perplexity -f
t="perplexity -m @MODEL@ --ctx 16 --chunks 1 -f @FILE@"
expect_ok "$t" "$tmp/text.txt"
each "$t" "$tmp/corpus-huge" "$((corpus_max + 1)) bytes, more than the $corpus_max this takes"
# Windows of 2 score no position: refused (it printed "-nan over 0 scored
# tokens" and exit 0); 3 is the least that scores one.
checks=$((checks + 1))
run_cmd "perplexity -m @MODEL@ --ctx 2 --chunks 1 -f @FILE@" "$tmp/text.txt"
if [ "$status" -eq 0 ] || grep -q -i nan "$tmp/out"; then
    fail "perplexity --ctx 2: exit $status: $(cat "$tmp/out" "$tmp/err")"
fi
checks=$((checks + 1))
run_cmd "perplexity -m @MODEL@ --ctx 3 --chunks 1 -f @FILE@" "$tmp/text.txt"
if [ "$status" -ne 0 ] || ! grep -q "over 1 scored tokens" "$tmp/out" || grep -q -i nan "$tmp/out"; then
    fail "perplexity --ctx 3: exit $status: $(cat "$tmp/out" "$tmp/err")"
fi

# tokenize --file and --bench
for t in "tokenize -m @MODEL@ --file @FILE@" "tokenize -m @MODEL@ --bench @FILE@ --seconds 0"; do
    expect_ok "$t" "$tmp/text.txt"
    each "$t" "$tmp/corpus-huge" "$((corpus_max + 1)) bytes, more than the $corpus_max this takes"
done

# mkmodel --tokenizer (engine/vocab-convert.c through tn_json_parse_file)
t="mkmodel --arch llama --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 --head-dim 16 --ff 64 --tokenizer @FILE@ -o @OUT@"
# (a directory is a tokenizer's folder here, not a bad file)
expect_bad "$t" "$tmp/fifo" "$not_regular"
expect_bad "$t" /dev/zero "$not_regular"
expect_bad "$t" "$tmp/tokenizer-huge.json" "$((json_max + 1)) bytes, more than the $json_max this takes"

# mkmodel -o: the finished file is renamed over the name, so a FIFO there
# was replaced by a regular file (as root, -o /dev/full replaced the device)
# and a directory was refused only after the whole model was written.
t="mkmodel --arch llama --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 --head-dim 16 --ff 64 -o @FILE@"
mkfifo "$tmp/out-fifo.gguf" || { echo "mkfifo failed" >&2; exit 1; }
expect_bad "$t" "$tmp/out-fifo.gguf" "$not_regular"
[ -p "$tmp/out-fifo.gguf" ] || fail "mkmodel -o FIFO: the FIFO was replaced"
expect_bad "$t" "$tmp/a-directory" "$not_regular"
if ls "$tmp"/out-fifo.gguf.tmp-* "$tmp"/a-directory.tmp-* >/dev/null 2>&1; then
    fail "mkmodel -o: a temporary file was left behind"
fi

# template --tools (only in a build with the server's json-glib)
printf '[{"type": "function", "function": {"name": "now", "description": "the time",
  "parameters": {"type": "object", "properties": {}}}}]\n' >"$tmp/tools.json"
t="template --kind qwen3 --user hi --tools @FILE@"
run_cmd "$t" "$tmp/tools.json"
if grep -q "needs a build with json-glib" "$tmp/err"; then
    echo "note: template --tools is not in this build; not checked"
else
    expect_ok "$t" "$tmp/tools.json"
    each "$t" "$tmp/prompt-huge" "$((prompt_max + 1)) bytes, more than the $prompt_max this takes"
fi

echo "cli-file-args: $checks cases, $failures failed"
[ "$failures" -eq 0 ]
