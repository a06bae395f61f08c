#!/bin/sh
# tern-cli run --single-turn / --chat and bench --pin through the real binary,
# on a tiny synthetic model:
#   - requests A, B, A, B, A with --json: one JSON object per line; every A
#     answer identical, every B identical; the pin restored every time
#     (kv_len == restored_tokens); a second run loads the pin from the cache
#     and answers the same;
#   - an oversized request prints its error object, the run goes on, the
#     exit status is 2; /stats, /pin and /reset work; bad options exit 1;
#   - bench --pin runs and reports the ratio.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
tmp=${TERN_TEST_TMP:-/tmp}/single-turn.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
export XDG_CACHE_HOME="$tmp/cache"

. "$(dirname "$0")/../checks.sh"

model="$tmp/m.gguf"
if ! "$cli" mkmodel --arch llama --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --ctx 2048 --seed 9 -o "$model" >"$tmp/mk.out" 2>&1; then
    cat "$tmp/mk.out" >&2
    echo "FAIL: mkmodel" >&2
    exit 1
fi

system="You are a terse assistant for a hardware store. Answer in one sentence, name the aisle, and never invent prices."
A="Where are the wood screws?"
B="Do you sell garden hoses, and how long are they?"
printf '%s\n%s\n%s\n%s\n%s\n' "$A" "$B" "$A" "$B" "$A" >"$tmp/in"

"$cli" run --single-turn -m "$model" -s "$system" -n 10 -t 2 --think off --json \
    <"$tmp/in" >"$tmp/out1" 2>"$tmp/err1"
status=$?
check "run --single-turn --json exits 0 (got $status: $(cat "$tmp/err1"))" test "$status" -eq 0
check "five JSON lines" test "$(wc -l <"$tmp/out1")" -eq 5

answer() { # answer FILE LINE
    sed -n "${2}p" "$1" | sed -n 's/.*"answer":"\(.*\)","stop".*/\1/p'
}
field() { # field FILE LINE NAME
    sed -n "${2}p" "$1" | sed -n "s/.*\"$3\":\([0-9.]*\).*/\1/p"
}
a1=$(answer "$tmp/out1" 1)
b1=$(answer "$tmp/out1" 2)
check "an answer to A" test -n "$a1"
check "A and B differ" test "$a1" != "$b1"
check "A identical (3rd)" test "$a1" = "$(answer "$tmp/out1" 3)"
check "A identical (5th)" test "$a1" = "$(answer "$tmp/out1" 5)"
check "B identical (4th)" test "$b1" = "$(answer "$tmp/out1" 4)"
for i in 1 2 3 4 5; do
    kv=$(field "$tmp/out1" $i kv_len)
    restored=$(field "$tmp/out1" $i restored_tokens)
    check "line $i: the KV is the pin after the request ($kv vs $restored)" \
        test -n "$kv" -a "$kv" = "$restored"
done

# A restart: the pin comes from the cache; the same answers.
"$cli" run --single-turn -m "$model" -s "$system" -n 10 -t 2 --think off --json \
    <"$tmp/in" >"$tmp/out2" 2>"$tmp/err2"
check "second run exits 0" test $? -eq 0
check "a pin snapshot was written" test -n "$(ls "$XDG_CACHE_HOME/tern/pins/" 2>/dev/null)"
check "after the restart, A is the same" test "$a1" = "$(answer "$tmp/out2" 1)"
check "after the restart, B is the same" test "$b1" = "$(answer "$tmp/out2" 2)"
"$cli" run --single-turn -m "$model" -s "$system" -n 4 -t 2 -p "$A" \
    >"$tmp/out3" 2>"$tmp/err3"
check "a restart reports the pin loaded from the cache" \
    grep -q "loaded from the pin cache" "$tmp/err3"

# Overflow: an error object for that line, the others answered, status 2.
long=$(awk 'BEGIN { for (i = 0; i < 200; i++) printf "tell me more about it "; }')
printf '%s\n%s\n' "$long" "$A" >"$tmp/in4"
"$cli" run --single-turn -m "$model" -s "$system" -n 10 -t 2 --think off --json -c 256 \
    <"$tmp/in4" >"$tmp/out4" 2>"$tmp/err4"
status=$?
check "a refused request gives exit status 2 (got $status)" test "$status" -eq 2
# 4,400 bytes cannot fit whatever they encode to: refused from their
# length, before encoding (docs/SESSION.md, "Overflow").
check "the overflow message" \
    grep -q '"error":"the message is [0-9]* bytes as the template writes it, at least [0-9]* tokens; [0-9]* are free after the [0-9]*-token system prompt"' "$tmp/out4"
check "the next request is still answered" test -n "$(answer "$tmp/out4" 2)"

# Commands.
printf '%s\n/stats\n/pin Be brief.\n/reset\n%s\n/quit\n%s\n' "$A" "$A" "$B" >"$tmp/in5"
"$cli" run --chat -m "$model" -s "$system" -n 4 -t 2 <"$tmp/in5" >"$tmp/out5" 2>"$tmp/err5"
check "run --chat exits 0" test $? -eq 0
check "/stats prints the pin" grep -q "^pinned [0-9]* tokens" "$tmp/out5"
check "/reset confirms" grep -q "conversation cleared" "$tmp/out5"
check "/pin re-pins" grep -q "pinned [0-9]* tokens" "$tmp/err5"
check "/quit stops reading" test "$(grep -c '^\[' "$tmp/err5")" -eq 2

# Usage errors.
"$cli" run --single-turn -s x >/dev/null 2>&1
check "no model: exit 1" test $? -eq 1
"$cli" run --single-turn -m "$model" --think maybe >/dev/null 2>&1
check "bad --think: exit 1" test $? -eq 1
"$cli" run --single-turn -m "$tmp/missing.gguf" -s x >/dev/null 2>&1
check "missing model: exit 2" test $? -eq 2

# The benchmark (small figures: it must run and report).
"$cli" bench --pin -m "$model" --short 10 --long 100 -c 256 -n 2 -r 1 -t 2 \
    >"$tmp/bench" 2>&1
check "bench --pin exits 0 ($(tail -1 "$tmp/bench"))" test $? -eq 0
check "bench --pin reports the ratio" grep -q "ratio long / short" "$tmp/bench"
check "bench --pin reports the fastest requests' ratio, a positive number" \
    awk '/of the fastest requests/ && $5 > 0 { ok = 1 } END { exit !ok }' "$tmp/bench"
check "bench --pin reports the snapshot load" grep -q "load, cold" "$tmp/bench"
"$cli" bench -m "$model" -p 16 -n 4 --verify 4 -r 2 -t 2 --json >"$tmp/bench.json" 2>"$tmp/bench.err"
check "bench exits 0" test $? -eq 0
check "bench --json: pp, tg, the verify curve 1..4, the bound, peak RSS" python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))
assert b["pp"]["tokens"] == 16 and b["pp"]["tps"] > 0 and b["tg"]["tps"] > 0
assert b["pp"]["tps_min"] <= b["pp"]["tps"] <= b["pp"]["tps_max"]
assert [v["batch"] for v in b["verify"]] == [1, 2, 4]
assert b["verify"][0]["vs_1"] == 1.0 and all(v["ms"] > 0 for v in b["verify"])
assert b["decode_bound_tps"] > 0 and b["bandwidth_gbs"]["median"] > 0 and b["peak_rss_bytes"] > 0
assert b["decode_pct_of_bound"] > 0
' "$tmp/bench.json"
# The context chose its prefetch modes before the timed steps, by measuring
# (this q8_0 model: its q8_0 products timed in every mode; the decode modes
# on one-token steps, the batch modes on the 4-row verify steps), and says
# what it chose.
check "bench --json: the prefetch modes and stream counts measured per type and reported" python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))
for key, modes in (("decode_prefetch", {"none", "near", "far"}), ("batch_prefetch", {"near", "far"}),
                   ("decode_streams", {"one", "two"})):
    p = b[key]
    assert p["chosen_by"] == "measurement", key
    assert set(p["ms"]) == modes and all(v > 0 for v in p["ms"].values()), key
    t = {x["type"]: x for x in p["types"]}
    assert "q8_0" in t and set(t["q8_0"]["ms"]) == modes, key
    assert all(v > 0 for v in t["q8_0"]["ms"].values()), key
    assert t["q8_0"]["mode"] in modes, key
    assert set(t["q8_0"]["wins"]) == modes and all(0 <= v <= 8 for v in t["q8_0"]["wins"].values()), key
' "$tmp/bench.json"
TERN_DECODE_PREFETCH=0 TERN_TWO_STREAMS=0 "$cli" bench -m "$model" -p 4 -n 4 -r 1 -t 2 --json \
    >"$tmp/bench0.json" 2>"$tmp/bench.err"
check "bench --json with TERN_DECODE_PREFETCH=0 TERN_TWO_STREAMS=0: both set by the environment" python3 -c '
import json, sys
for key in ("decode_prefetch", "decode_streams"):
    p = json.load(open(sys.argv[1]))[key]
    assert p["chosen_by"] == "environment" and p["types"] == [] and p["samples"] == 0, key
' "$tmp/bench0.json"
# bench --kernels reports each product in its fastest prefetch mode, as a
# context would choose it: at one row among all three and in one or two
# weight streams, at four among near and far; with TERN_DECODE_PREFETCH set,
# one row runs only in that mode.
"$cli" bench --kernels --types q4_K,q8_0 --shapes 256x512 --batch 1,4 -r 1 -t 2 --json \
    >"$tmp/kern.json" 2>"$tmp/kern.err"
TERN_DECODE_PREFETCH=near "$cli" bench --kernels --types q4_K,q8_0 --shapes 256x512 --batch 1,4 \
    -r 1 -t 2 --json >"$tmp/kern-near.json" 2>>"$tmp/kern.err"
check "bench --kernels --json: the fastest prefetch mode per product, the forced one alone" python3 -c '
import json, sys
def rows(path):
    d = json.load(open(path))
    r = [x for x in (d["results"] if isinstance(d, dict) else d)]
    assert len(r) == 4, r
    return r
for x in rows(sys.argv[1]):
    assert x["prefetch"] in (("none", "near", "far") if x["batch"] == 1 else ("near", "far")), x
    assert x.get("streams") in ((1, 2) if x["batch"] == 1 else (None,)), x
for x in rows(sys.argv[2]):
    assert x["batch"] != 1 or x["prefetch"] == "near", x
' "$tmp/kern.json" "$tmp/kern-near.json"

# Seeds: sampled requests draw a new seed each without --seed (the same
# question twice gets two answers), and repeat exactly with one.
printf '%s\n%s\n' "$A" "$A" >"$tmp/in2"
"$cli" run --single-turn -m "$model" -s "$system" -n 24 -t 2 --temp 2 --top-k 0 --top-p 1 \
    --json <"$tmp/in2" >"$tmp/seed0" 2>"$tmp/seed0.err"
check "sampled run exits 0 ($(cat "$tmp/seed0.err"))" test $? -eq 0
check "no --seed: the same request sampled twice differs" \
    test "$(answer "$tmp/seed0" 1)" != "$(answer "$tmp/seed0" 2)"
"$cli" run --single-turn -m "$model" -s "$system" -n 24 -t 2 --temp 2 --top-k 0 --top-p 1 \
    --seed 5 --json <"$tmp/in2" >"$tmp/seed5" 2>"$tmp/seed5.err"
check "--seed 5: the same request sampled twice is the same" \
    test -n "$(answer "$tmp/seed5" 1)" -a "$(answer "$tmp/seed5" 1)" = "$(answer "$tmp/seed5" 2)"

# Ctrl-C during one answer (-p, or --raw's whole input): what was computed
# is reported ("stop: cancelled") and the exit status is 130, as a shell
# gives a command SIGINT ended (it was 0: `tern-cli run ... && next` went
# on). A background job of this non-interactive shell starts with SIGINT
# ignored, so a signal sent before tern-cli installs its handler is lost
# and the run ends as if never stopped (seen under load, where loading
# took more than the half second of CPU once waited for): the signal goes
# once /proc says SIGINT is caught, and the run has then used a further
# half second of CPU in the prefill of 7,500 tokens, which takes seconds
# even in a release build.
slow="$tmp/slow.gguf"
"$cli" mkmodel --arch llama --type q8_0 --embd 768 --layers 8 --heads 12 --kv-heads 4 \
    --head-dim 64 --ff 2048 --ctx 8192 --seed 3 -o "$slow" >"$tmp/mk-slow.out" 2>&1
check "mkmodel for the Ctrl-C runs ($(cat "$tmp/mk-slow.out"))" test -s "$slow"
long=$(awk 'BEGIN { for (i = 0; i < 7500; i++) printf "w "; }')
cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
sigint_caught() {
    # SigCgt is a hexadecimal mask; SIGINT (2) is its bit 1.
    mask=$(awk '$1 == "SigCgt:" { print $2 }' "/proc/$1/status" 2>/dev/null)
    [ -n "$mask" ] && [ $(( 0x$mask & 2 )) -ne 0 ]
}
for mode in raw prompt; do
    if [ "$mode" = raw ]; then
        printf '%s' "$long" | "$cli" run -m "$slow" --raw -c 8192 -n 4 -t 2 \
            >"$tmp/int.out" 2>"$tmp/int.err" &
    else
        "$cli" run -m "$slow" -p "$long" -c 8192 -n 4 -t 2 </dev/null \
            >"$tmp/int.out" 2>"$tmp/int.err" &
    fi
    pid=$!
    waited=0
    while ! sigint_caught $pid && [ $waited -lt 1200 ] && kill -0 $pid 2>/dev/null; do
        sleep 0.1
        waited=$((waited + 1))
    done
    from=$(cpu_ticks $pid)
    while [ "$(cpu_ticks $pid)" -lt $((from + 50)) ] && [ $waited -lt 1200 ] &&
        kill -0 $pid 2>/dev/null; do
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -INT $pid
    wait $pid
    status=$?
    check "$mode: Ctrl-C mid-prefill exits 130 (got $status: $(tail -c 300 "$tmp/int.err"))" \
        test "$status" -eq 130
    check "$mode: the stopped answer is reported ($(tail -c 300 "$tmp/int.err"))" \
        grep -q "cancelled" "$tmp/int.err"
done

checks_done single-turn
