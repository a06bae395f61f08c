#!/bin/sh
# tern-cli run, serve and perplexity show how far a model's load is when
# stderr is a terminal: "loading: N %" rewritten in place, the line cleared
# before anything else is written (the answer, an error). Not on a pipe or
# a file: scripts read stderr. The terminal is script(1)'s pseudo-terminal
# (util-linux's bsdutils, essential in Debian).
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
command -v script >/dev/null 2>&1 || { echo "script(1) is missing: skipped"; exit 77; }
tmp=${TERN_TEST_TMP:-/tmp}/load-progress.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
checks=0

check() { # DESCRIPTION, then a command that must succeed
    what=$1
    shift
    checks=$((checks + 1))
    if ! "$@"; then
        failures=$((failures + 1))
        printf 'FAIL: %s\n' "$what" >&2
    fi
}

# Enough tensors for many steps of 1 %: 8 layers of 256-wide Q4_0.
model=$tmp/model.gguf
"$cli" mkmodel --arch llama --type q4_0 --embd 256 --layers 8 --heads 4 --kv-heads 2 \
    --head-dim 64 --ff 1024 -o "$model" >"$tmp/mk.log" 2>&1 ||
    { echo "mkmodel failed: $(cat "$tmp/mk.log")" >&2; exit 1; }
export TERN_REPACK_CACHE=off
# script(1)'s terminal is an xterm-like one whatever runs the test: a
# TERM=dumb around it (the bare-Debian check's chroot, Emacs) asks for no
# live figures, which the dumb case below checks on purpose.
export TERM=xterm

# On a terminal: several figures, rising, then the line cleared before the
# answer's statistics.
script -qec "'$cli' run -m '$model' -p hello -n 3 --seed 1" /dev/null >"$tmp/tty.out" 2>&1
check "run on a terminal exits 0" [ $? -eq 0 ]
tr '\r' '\n' <"$tmp/tty.out" | sed -n 's/^loading: \([0-9]*\) %.*/\1/p' >"$tmp/figures"
n=$(wc -l <"$tmp/figures")
check "run on a terminal: $n progress figures (at least 5)" [ "$n" -ge 5 ]
check "the figures rise and end at 100" awk 'NR > 1 && $1 <= last { bad = 1 } { last = $1 }
    END { exit bad || last != 100 }' "$tmp/figures"
check "the line is cleared after the last figure, before the statistics" \
    grep -q "$(printf 'loading: 100 %%\r\r\033\\[K')" "$tmp/tty.out"
check "the answer's statistics follow" grep -q "generated 3 tokens" "$tmp/tty.out"

# A notice the engine writes during the load (here: the repack cache's
# directory is a file) starts a line of its own, over the figure, not
# glued to its end ("loading: 99 %tern: repack cache: ...").
: >"$tmp/notadir"
TERN_REPACK_CACHE=$tmp/notadir \
    script -qec "'$cli' run -m '$model' -p hello -n 3 --seed 1" /dev/null >"$tmp/notice.out" 2>&1
check "run with a cache notice exits 0" [ $? -eq 0 ]
check "the notice starts a line" sh -c "tr '\r' '\n' <'$tmp/notice.out' | grep -q '^tern: repack cache: '"
check "the figures go on after the notice" grep -q "loading: 100 %" "$tmp/notice.out"

# A terminal that says it cannot move the cursor (TERM=dumb: Emacs's
# shell) gets no figures and no escape codes, as a pipe.
TERM=dumb script -qec "'$cli' run -m '$model' -p hello -n 3 --seed 1" /dev/null >"$tmp/dumb.out" 2>&1
check "run on a dumb terminal exits 0" [ $? -eq 0 ]
check "run on a dumb terminal: no progress" sh -c "! grep -q 'loading:' '$tmp/dumb.out'"
check "run on a dumb terminal: no escape codes" sh -c "! grep -q \"\$(printf '\033')\" '$tmp/dumb.out'"
check "run on a dumb terminal: the answer's statistics" grep -q "generated 3 tokens" "$tmp/dumb.out"

# Not on a terminal: no figures on stderr.
"$cli" run -m "$model" -p hello -n 3 --seed 1 >"$tmp/pipe.out" 2>"$tmp/pipe.err"
check "run on a pipe exits 0" [ $? -eq 0 ]
check "run on a pipe: no progress on stderr" sh -c "! grep -q 'loading:' '$tmp/pipe.err'"
check "run on a pipe: the answer's statistics" grep -q "generated 3 tokens" "$tmp/pipe.err" "$tmp/pipe.out"

# perplexity shows it too (serve is the same call, cli_model_load).
printf 'one two three four five six seven eight nine ten\n' >"$tmp/text.txt"
script -qec "'$cli' perplexity -m '$model' -f '$tmp/text.txt' -c 8" /dev/null >"$tmp/ppl.out" 2>&1
check "perplexity on a terminal exits 0" [ $? -eq 0 ]
check "perplexity on a terminal shows the load" grep -q "loading: 100 %" "$tmp/ppl.out"

echo "cli-load-progress: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
