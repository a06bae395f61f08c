#!/bin/sh
# tern-cli serve through real HTTP on 127.0.0.1 (curl), on a tiny synthetic
# model: every endpoint, the OpenAI error shape for each error case, SSE
# framing and usage, identical greedy answers, a small concurrent load, a
# client disconnecting mid-stream, the queue bound (429), the API key,
# CORS, and a clean stop on SIGTERM.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
# A test that cannot run skips (77), except in CI, where it fails.
cannot_run() {
    echo "cannot run: $*"
    [ "${CI:-}" = true ] && exit 1
    exit 77
}
command -v curl >/dev/null 2>&1 || cannot_run "curl is missing (tools/ensure-deps.sh manager)"
py=${TERN_PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || cannot_run "python3 is missing"
tmp=${TERN_TEST_TMP:-/tmp}/serve.$$
mkdir -p "$tmp" || exit 1
export XDG_CACHE_HOME="$tmp/cache"
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    [ "${failures:-0}" -eq 0 ] && rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

. "$(dirname "$0")/../checks.sh"
has() { grep -q -- "$2" "$1"; } # has FILE PATTERN
field() { # FILE EXPR: a Python expression of the JSON document d
    "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

model="$tmp/tiny.gguf"
if ! "$cli" mkmodel --arch llama --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --ctx 2048 --seed 9 -o "$model" >"$tmp/mk.out" 2>&1; then
    cat "$tmp/mk.out" >&2
    echo "FAIL: mkmodel" >&2
    exit 1
fi

# start NAME ARGS...: starts a server on an ephemeral port; sets $port.
start() {
    name=$1
    shift
    "$cli" serve -m "$model" --port 0 -t 1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    spid=$!
    pids="$pids $spid"
    port=""
    i=0
    while [ $i -lt 300 ]; do
        port=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$tmp/$name.out")
        [ -n "$port" ] && return 0
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    echo "FAIL: server $name did not start: $(cat "$tmp/$name.err")" >&2
    exit 1
}
# stop: SIGTERM, then the exit status must be 0 within 20 s.
stop() {
    kill -TERM "$spid"
    i=0
    while kill -0 "$spid" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    wait "$spid"
    status=$?
    check "server stops cleanly on SIGTERM (status $status: $(tail -5 "$tmp/$name.err"))" \
        test "$status" -eq 0
}
# req FILE METHOD PATH [BODY] [curl args...]: prints the HTTP status.
req() {
    out=$1 method=$2 path=$3 body=${4:-}
    shift 3
    [ $# -gt 0 ] && shift
    if [ -n "$body" ]; then
        curl -sS -m 60 -o "$out" -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' \
            --data-binary "$body" "$@" "http://127.0.0.1:$port$path"
    else
        curl -sS -m 60 -o "$out" -w '%{http_code}' -X "$method" "$@" "http://127.0.0.1:$port$path"
    fi
}
is_error_shape() { # FILE: {"error":{"message":...,"type":...,"param":...,"code":...}}
    has "$1" '^{"error":{"message":"[^"]' && has "$1" '"type":"' && has "$1" '"param":' &&
        has "$1" '"code":'
}

# ------------------------------------------------------------ main server
start main --queue 64
system="You are a terse assistant for a hardware store."
chat_body() { # USER [EXTRA JSON MEMBERS]
    printf '{"model":"tiny","messages":[{"role":"system","content":"%s"},{"role":"user","content":"%s"}],"max_tokens":8%s}' \
        "$system" "$1" "${2:-}"
}

s=$(req "$tmp/health" GET /health)
check "GET /health 200 (got $s)" test "$s" = 200
check "/health says ok" has "$tmp/health" '"status":"ok"'

s=$(req "$tmp/models" GET /v1/models)
check "GET /v1/models 200 (got $s)" test "$s" = 200
check "/v1/models lists tiny" has "$tmp/models" '"object":"list","data":\[{"id":"tiny","object":"model"'

s=$(req "$tmp/c1" POST /v1/chat/completions "$(chat_body 'Where are the screws?')")
check "chat 200 (got $s: $(cat "$tmp/c1"))" test "$s" = 200
check "chat.completion shape" has "$tmp/c1" '"object":"chat.completion"'
check "assistant message" has "$tmp/c1" '"message":{"role":"assistant","content":"'
check "finish_reason length (max_tokens 8)" has "$tmp/c1" '"finish_reason":"length"'
check "usage completion_tokens 8" has "$tmp/c1" '"completion_tokens":8'
check "usage timings" has "$tmp/c1" '"timings":{"ttft_ms":'
s=$(req "$tmp/c2" POST /v1/chat/completions "$(chat_body 'Where are the screws?')")
content() { # FILE: the answer's text (message content or completion text)
    "$py" -c 'import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]
sys.stdout.write(c["message"]["content"] if "message" in c else c["text"])' "$1" 2>/dev/null
}
check "identical greedy answers" test "$(content "$tmp/c1")" = "$(content "$tmp/c2")"
restored=$(sed -n 's/.*"restored_tokens":\([0-9]*\).*/\1/p' "$tmp/c2")
check "second request restores the pinned system prompt (restored $restored)" \
    test "${restored:-0}" -gt 0
usage_sane() { # FILE: the usage figures add up and the rates are positive
    field "$1" 'int((lambda u, t: u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["prompt_tokens"] == t["prefill_tokens"] + t["restored_tokens"] and t["prefill_tokens"] > 0 and t["ttft_ms"] > 0 and t["prefill_tok_s"] > 0 and t["decode_tok_s"] > 0 and t["drafted_tokens"] == 0 and t["accepted_tokens"] == 0)(d["usage"], d["usage"]["timings"]))'
}
check "usage adds up, first request (pin prefilled): $(field "$tmp/c1" 'd["usage"]')" test "$(usage_sane "$tmp/c1")" = 1
check "usage adds up, second request (pin kept): $(field "$tmp/c2" 'd["usage"]')" test "$(usage_sane "$tmp/c2")" = 1
check "the first request prefilled its pin, the second restored it" \
    test "$(field "$tmp/c1" 'd["usage"]["timings"]["pin"]') $(field "$tmp/c2" 'd["usage"]["timings"]["pin"]')" = "prefilled kept"
check "the same prompt size both times" \
    test "$(field "$tmp/c1" 'd["usage"]["prompt_tokens"]')" = "$(field "$tmp/c2" 'd["usage"]["prompt_tokens"]')"
for bad in '"temperature":"hot"' '"stream":"yes"' '"max_tokens":0' '"top_p":0' '"stop":[1]' '"tern":{"thinking":1}' '"model":7' '"messages":[{"role":"function","content":"x"}]' '"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}]'; do
    s=$(req "$tmp/pbad" POST /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],$bad}")
    check "chat: {$bad} 400 (got $s: $(cat "$tmp/pbad"))" test "$s" = 400
    check "chat: {$bad} error shape" is_error_shape "$tmp/pbad"
    check "chat: {$bad} names the parameter" has "$tmp/pbad" '"param":"'
done

# Parameters: sampling with a seed is reproducible; stop; penalties; tern.
s=$(req "$tmp/p1" POST /v1/chat/completions "$(chat_body 'Hi' ',"temperature":0.9,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":7,"presence_penalty":0.5,"frequency_penalty":0.5,"stop":["zzz"],"tern":{"thinking":false}')")
check "sampling parameters 200 (got $s: $(cat "$tmp/p1"))" test "$s" = 200
req "$tmp/p2" POST /v1/chat/completions "$(chat_body 'Hi' ',"temperature":0.9,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":7,"presence_penalty":0.5,"frequency_penalty":0.5,"stop":["zzz"],"tern":{"thinking":false}')" >/dev/null
check "same seed, same sampled answer" test "$(content "$tmp/p1")" = "$(content "$tmp/p2")"
s=$(req "$tmp/mt" POST /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"c"}]}],"max_completion_tokens":4}')
check "multi-turn with content parts 200 (got $s: $(cat "$tmp/mt"))" test "$s" = 200
check "multi-turn completion_tokens 4" has "$tmp/mt" '"completion_tokens":4'

# Streaming.
curl -sS -N -m 60 -H 'Content-Type: application/json' \
    --data-binary "$(chat_body 'Where are the screws?' ',"stream":true,"stream_options":{"include_usage":true}')" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/sse"
check "SSE: every non-empty line is a data: event" \
    test "$(grep -v '^$' "$tmp/sse" | grep -cv '^data: ')" -eq 0
check "SSE: chunks" has "$tmp/sse" '^data: {"id":"chatcmpl-[0-9a-f]*","object":"chat.completion.chunk"'
check "SSE: role first" has "$tmp/sse" '"delta":{"role":"assistant","content":""}'
check "SSE: final [DONE]" test "$(tail -n 2 "$tmp/sse" | head -n 1)" = "data: [DONE]"
check "SSE: finish chunk" has "$tmp/sse" '"delta":{},"logprobs":null,"finish_reason":"length"'
check "SSE: usage chunk" has "$tmp/sse" '"choices":\[\],"usage":{"prompt_tokens":[1-9]'
streamed=$(grep -o '"delta":{"content":"[^"]*"' "$tmp/sse" | sed 's/"delta":{"content":"//; s/"$//' | tr -d '\n')
check "streamed text equals the non-streamed answer ('$streamed' vs '$(content "$tmp/c1")')" \
    test "$streamed" = "$(content "$tmp/c1")"

# /v1/completions
s=$(req "$tmp/tc" POST /v1/completions '{"model":"tiny","prompt":"Once upon","max_tokens":5}')
check "completions 200 (got $s: $(cat "$tmp/tc"))" test "$s" = 200
check "text_completion shape" has "$tmp/tc" '"object":"text_completion".*"text":"'
# A raw continuation: the prompt is exactly the prompt's tokens (BOS when the
# vocabulary wants one), no chat template around it.
raw_tokens=$("$cli" tokenize -m "$model" --special --bos "Once upon" | wc -w)
check "completions: prompt_tokens is the raw prompt's $raw_tokens tokens ($(field "$tmp/tc" 'd["usage"]["prompt_tokens"]'))" \
    test "$(field "$tmp/tc" 'd["usage"]["prompt_tokens"]')" = "$raw_tokens"
check "completions: max_tokens honoured" test "$(field "$tmp/tc" 'd["usage"]["completion_tokens"]')" = 5
req "$tmp/tc2" POST /v1/completions '{"prompt":["Once upon"],"max_tokens":5}' >/dev/null
check "completions: array of one string, model omitted, same greedy answer" \
    test "$(content "$tmp/tc2")" = "$(content "$tmp/tc")"
req "$tmp/tc3" POST /v1/completions '{"model":"tiny","prompt":"Once upon"}' >/dev/null
check "completions: default max_tokens 16 ($(field "$tmp/tc3" 'd["usage"]["completion_tokens"]'))" \
    test "$(field "$tmp/tc3" 'd["usage"]["completion_tokens"]')" -le 16
req "$tmp/tc4" POST /v1/completions '{"model":"tiny","prompt":"Once upon","max_tokens":5,"echo":true}' >/dev/null
check "completions: echo puts the prompt first" \
    test "$(content "$tmp/tc4")" = "Once upon$(content "$tmp/tc")"
curl -sS -N -m 60 -H 'Content-Type: application/json' \
    --data-binary '{"model":"tiny","prompt":"Once upon","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}' \
    "http://127.0.0.1:$port/v1/completions" >"$tmp/tsse"
check "completions SSE: text_completion chunks" has "$tmp/tsse" '^data: {"id":"cmpl-[0-9a-f]*","object":"text_completion"'
check "completions SSE: final [DONE]" test "$(tail -n 2 "$tmp/tsse" | head -n 1)" = "data: [DONE]"
check "completions SSE: usage chunk" has "$tmp/tsse" '"choices":\[\],"usage":{"prompt_tokens":[1-9]'
tstreamed=$("$py" -c 'import json, sys
out = ""
for line in open(sys.argv[1]):
    if line.startswith("data: {") and "\"choices\":[{" in line:
        out += json.loads(line[6:])["choices"][0]["text"]
sys.stdout.write(out)' "$tmp/tsse")
check "completions SSE: streamed text equals the answer" test "$tstreamed" = "$(content "$tmp/tc")"
for bad in '"prompt":["a",7]' '"prompt":7' '"prompt":"a","best_of":2' '"prompt":"a","suffix":"z"' '"prompt":"a","n":3' '"prompt":"a","echo":"yes"'; do
    s=$(req "$tmp/tcbad" POST /v1/completions "{\"model\":\"tiny\",$bad}")
    check "completions: {$bad} 400 (got $s)" test "$s" = 400
    check "completions: {$bad} error shape" is_error_shape "$tmp/tcbad"
done
s=$(req "$tmp/tcover" POST /v1/completions "{\"model\":\"tiny\",\"prompt\":\"$(head -c 6000 /dev/zero | tr '\0' 'a' | sed 's/a\{5\}/word /g')\"}")
check "completions: context overflow 400 (got $s)" test "$s" = 400
check "completions: context overflow code, param prompt" \
    test "$(field "$tmp/tcover" 'd["error"]["code"] + "/" + d["error"]["param"]')" = "context_length_exceeded/prompt"

# Speculation per request: the same greedy answer with prompt lookup on or
# off; "server" needs a server drafter (--spec).
rep='"messages":[{"role":"user","content":"repeat after me: 0 lG0 lG0 lG0 lG"}],"max_tokens":40'
req "$tmp/sp0" POST /v1/chat/completions "{$rep}" >/dev/null
req "$tmp/sp1" POST /v1/chat/completions "{$rep,\"tern\":{\"speculation\":\"lookup\",\"draft_max\":6}}" >/dev/null
check "speculation: same greedy answer with lookup" test "$(content "$tmp/sp1")" = "$(content "$tmp/sp0")"
check "speculation: off by default here, drafts with lookup ($(field "$tmp/sp0" 'd["usage"]["timings"]["drafted_tokens"]'), $(field "$tmp/sp1" 'd["usage"]["timings"]["drafted_tokens"]'))" \
    test "$(field "$tmp/sp0" 'd["usage"]["timings"]["drafted_tokens"]')" = 0 -a "$(field "$tmp/sp1" 'int(d["usage"]["timings"]["drafted_tokens"] > 0 and 0 <= d["usage"]["timings"]["accepted_tokens"] <= d["usage"]["timings"]["drafted_tokens"])')" = 1
req "$tmp/sp2" POST /v1/completions '{"prompt":"0 lG0 lG0 lG","max_tokens":40,"tern":{"speculation":true}}' >/dev/null
req "$tmp/sp3" POST /v1/completions '{"prompt":"0 lG0 lG0 lG","max_tokens":40}' >/dev/null
check "speculation: completions, same answer" test "$(content "$tmp/sp2")" = "$(content "$tmp/sp3")"
for bad in '"speculation":"server"' '"speculation":"fast"' '"draft_max":0' '"draft_max":"x"'; do
    s=$(req "$tmp/spbad" POST /v1/chat/completions "{$rep,\"tern\":{$bad}}")
    check "speculation: {$bad} 400 (got $s: $(cat "$tmp/spbad"))" test "$s" = 400
done

# A conversation without a system message does not inherit the system
# prompt pinned by an earlier request.
conv='{"model":"tiny","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_tokens":6}'
req "$tmp/cv1" POST /v1/chat/completions "$conv" >/dev/null
req "$tmp/cvx" POST /v1/chat/completions '{"messages":[{"role":"system","content":"Something else entirely, and much longer than the other system prompt, so that its tokens would show in the count."},{"role":"user","content":"x"}],"max_tokens":2}' >/dev/null
req "$tmp/cv2" POST /v1/chat/completions "$conv" >/dev/null
check "conversation answers do not depend on the previous request's system prompt" \
    test "$(content "$tmp/cv1")" = "$(content "$tmp/cv2")"
check "conversation prompts do not hold the previous request's system prompt ($(field "$tmp/cv1" 'd["usage"]["prompt_tokens"]') vs $(field "$tmp/cv2" 'd["usage"]["prompt_tokens"]') tokens)" \
    test "$(field "$tmp/cv1" 'd["usage"]["prompt_tokens"]')" = "$(field "$tmp/cv2" 'd["usage"]["prompt_tokens"]')"
check "conversation answered" test -n "$(content "$tmp/cv1")"
# A growing conversation prefills only its new turn.
cv1_text=$(field "$tmp/cv1" 'json.dumps(d["choices"][0]["message"]["content"])')
req "$tmp/cv3" POST /v1/chat/completions "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"},{\"role\":\"assistant\",\"content\":$cv1_text},{\"role\":\"user\",\"content\":\"d\"}],\"max_tokens\":6}" >/dev/null
check "a growing conversation reuses the KV of the previous turns (restored $(field "$tmp/cv3" 'd["usage"]["timings"]["restored_tokens"]'), first prompt $(field "$tmp/cv2" 'd["usage"]["prompt_tokens"]'))" \
    test "$(field "$tmp/cv3" 'int(d["usage"]["timings"]["restored_tokens"] >= '"$(field "$tmp/cv2" 'd["usage"]["prompt_tokens"]')"')')" = 1

# Errors.
s=$(req "$tmp/e1" POST /v1/chat/completions '{"model": "tiny", "messages": [')
check "malformed JSON 400 (got $s)" test "$s" = 400
check "malformed JSON error shape" is_error_shape "$tmp/e1"
s=$(req "$tmp/e2" POST /v1/chat/completions '{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}')
check "unknown model 404 (got $s)" test "$s" = 404
check "unknown model error shape" is_error_shape "$tmp/e2"
check "unknown model code" has "$tmp/e2" '"code":"model_not_found"'
s=$(req "$tmp/e3" POST /v1/chat/completions "$(chat_body x ',"n":2')")
check "n=2 400 (got $s)" test "$s" = 400
check "n=2 names the parameter" has "$tmp/e3" '"param":"n"'
long=$(head -c 6000 /dev/zero | tr '\0' 'a' | sed 's/a\{5\}/word /g')
s=$(req "$tmp/e4" POST /v1/chat/completions "$(chat_body "$long")")
check "context overflow 400 (got $s: $(cat "$tmp/e4"))" test "$s" = 400
check "context overflow code and message" has "$tmp/e4" '"code":"context_length_exceeded"'
check "context overflow names the tokens" has "$tmp/e4" 'tokens'
head -c 2000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
s=$(curl -sS -m 60 -o "$tmp/e5" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$tmp/big" "http://127.0.0.1:$port/v1/chat/completions")
check "body over the limit 413 (got $s)" test "$s" = 413
check "413 error shape" is_error_shape "$tmp/e5"
s=$(curl -sS -m 60 -o "$tmp/e5c" -w '%{http_code}' -H 'Content-Type: application/json' \
    -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/big" "http://127.0.0.1:$port/v1/chat/completions")
check "chunked body over the limit 413 (got $s)" test "$s" = 413
check "chunked 413 error shape" is_error_shape "$tmp/e5c"
s=$(req "$tmp/e6" GET /v1/nothing)
check "unknown path 404 (got $s)" test "$s" = 404
check "unknown path error shape, code not_found" has "$tmp/e6" '"code":"not_found"'
for mp in "GET /v1/chat/completions" "GET /v1/completions" "POST /v1/models" "POST /health"; do
    s=$(req "$tmp/e405" ${mp% *} ${mp#* })
    check "$mp: 405 (got $s)" test "$s" = 405
    check "$mp: error shape" is_error_shape "$tmp/e405"
done
s=$(req "$tmp/e7" POST /v1/chat/completions '{"model":"tiny","messages":[]}')
check "empty messages 400 (got $s)" test "$s" = 400
s=$(req "$tmp/e8" OPTIONS /v1/models)
check "no CORS by default" sh -c "! curl -sS -i http://127.0.0.1:$port/v1/models | grep -qi access-control"

# Concurrent load: 4 clients x 10 requests; every answer complete and equal
# to the same request's answer alone.
for q in A B; do
    req "$tmp/ref$q" POST /v1/chat/completions "$(chat_body "question $q")" >/dev/null
done
client() { # N
    k=0
    while [ $k -lt 10 ]; do
        q=A
        [ $(((k + $1) % 2)) -eq 1 ] && q=B
        s=$(req "$tmp/l$1.$k" POST /v1/chat/completions "$(chat_body "question $q")")
        if [ "$s" != 200 ] || [ "$(content "$tmp/l$1.$k")" != "$(content "$tmp/ref$q")" ]; then
            echo "client $1 request $k: $s $(cat "$tmp/l$1.$k")" >>"$tmp/load.bad"
        fi
        k=$((k + 1))
    done
}
t0=$(date +%s)
cpids=""
for c in 1 2 3 4; do client $c & cpids="$cpids $!"; done
wait_clients() { for c in $cpids; do wait "$c"; done; cpids=""; }
wait_clients
t1=$(date +%s)
check "load: 40 requests, all complete and identical per question ($(cat "$tmp/load.bad" 2>/dev/null | head -3))" \
    test ! -e "$tmp/load.bad"
check "load: under 120 s ($((t1 - t0)) s)" test $((t1 - t0)) -lt 120
s=$(req "$tmp/after" GET /health)
check "healthy after the load" test "$s" = 200
stop

# ------------------------------------------------------------ pins
# --pins 2: two system prompts alternate without re-pinning (restored from
# the pin, the same answers); a third replaces the least recently used.
start pins --pins 2 --spec lookup
# First on a fresh server: the conversation's size with no system prompt at
# all; the main server's answers must match it.
req "$tmp/cv0" POST /v1/chat/completions "$conv" >/dev/null
check "conversation on a fresh server: the same prompt size and answer as after other requests" \
    test "$(field "$tmp/cv0" 'd["usage"]["prompt_tokens"]') $(content "$tmp/cv0")" = "$(field "$tmp/cv1" 'd["usage"]["prompt_tokens"]') $(content "$tmp/cv1")"
pin_req() { # NAME SYSTEM
    req "$tmp/pin.$1" POST /v1/chat/completions \
        "{\"messages\":[{\"role\":\"system\",\"content\":\"$2\"},{\"role\":\"user\",\"content\":\"same question\"}],\"max_tokens\":6}" >/dev/null
    printf '%s' "$(field "$tmp/pin.$1" 'd["usage"]["timings"]["pin"]')"
}
SA="System prompt A: you sell garden tools and answer briefly."
SB="System prompt B: you are a pirate who answers in riddles."
SC="System prompt C: you translate everything into French."
seq=""
for step in A1 B1 A2 B2 A3 C1 A4 B3; do
    case $step in A*) sys=$SA ;; B*) sys=$SB ;; *) sys=$SC ;; esac
    seq="$seq $step=$(pin_req "$step" "$sys")"
done
check "pins: A and B alternate without re-pinning, C evicts B ($seq)" \
    sh -c "echo '$seq' | grep -Eq '^ A1=(prefilled|loaded) B1=(prefilled|loaded) A2=kept B2=kept A3=kept C1=(prefilled|loaded) A4=kept B3=(prefilled|loaded)\$'"
for n in 2 3 4; do
    check "pins: A$n answered as A1" test "$(content "$tmp/pin.A$n")" = "$(content "$tmp/pin.A1")"
done
check "pins: B after eviction answered as before" test "$(content "$tmp/pin.B3")" = "$(content "$tmp/pin.B1")"
# --spec lookup: speculation by default, off on request, the same answer.
req "$tmp/ps1" POST /v1/chat/completions "{$rep}" >/dev/null
req "$tmp/ps2" POST /v1/chat/completions "{$rep,\"tern\":{\"speculation\":false}}" >/dev/null
check "--spec lookup: drafts by default, none when the request says false" \
    test "$(field "$tmp/ps1" 'int(d["usage"]["timings"]["drafted_tokens"] > 0)') $(field "$tmp/ps2" 'd["usage"]["timings"]["drafted_tokens"]')" = "1 0"
check "--spec lookup: the same answer either way" test "$(content "$tmp/ps1")" = "$(content "$tmp/ps2")"
s=$(req "$tmp/ps3" POST /v1/chat/completions "{$rep,\"tern\":{\"speculation\":\"server\"}}")
check "--spec lookup: speculation \"server\" accepted (got $s)" test "$s" = 200
check "pins: a kept pin is restored, not prefilled (A2: restored $(field "$tmp/pin.A2" 'd["usage"]["timings"]["restored_tokens"]'), prefilled $(field "$tmp/pin.A2" 'd["usage"]["timings"]["prefill_tokens"]'); A1 prefilled $(field "$tmp/pin.A1" 'd["usage"]["timings"]["prefill_tokens"]'))" \
    test "$(field "$tmp/pin.A2" 'int(d["usage"]["timings"]["restored_tokens"] > 0 and d["usage"]["timings"]["prefill_tokens"] < d["usage"]["prompt_tokens"] and d["usage"]["prompt_tokens"] == '"$(field "$tmp/pin.A1" 'd["usage"]["prompt_tokens"]')"')')" = 1
stop

# ------------------------------------------------------------ slow tokens
# --debug-token-delay makes generation slow enough to observe the queue and a
# disconnect; --queue 2: one running, one waiting, the third is refused.
start slow --queue 2 --debug-token-delay 50 --api-key sekret --cors http://example.test
auth='Authorization: Bearer sekret'
s=$(req "$tmp/k1" GET /v1/models)
check "missing key 401 (got $s)" test "$s" = 401
check "401 error shape" is_error_shape "$tmp/k1"
s=$(req "$tmp/k2" GET /v1/models '' -H 'Authorization: Bearer wrong')
check "wrong key 401 (got $s)" test "$s" = 401
s=$(req "$tmp/k3" GET /v1/models '' -H "$auth")
check "right key 200 (got $s)" test "$s" = 200
check "CORS header with --cors" sh -c "curl -sS -i -H '$auth' http://127.0.0.1:$port/v1/models | grep -qi '^access-control-allow-origin: http://example.test'"
s=$(req "$tmp/k4" OPTIONS /v1/chat/completions)
check "CORS preflight 204 (got $s)" test "$s" = 204

# Disconnect mid-stream: the generation (200 tokens, 50 ms each) is cancelled
# at the next token; the next request is then answered quickly.
curl -sS -N -m 1 -H "$auth" -H 'Content-Type: application/json' \
    --data-binary "$(chat_body 'long story' ',"max_tokens":200,"stream":true')" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/cut" 2>/dev/null
check "disconnect: some chunks arrived" has "$tmp/cut" '^data: {'
t0=$(date +%s)
s=$(req "$tmp/d2" POST /v1/chat/completions "$(chat_body 'short' ',"max_tokens":2')" -H "$auth")
t1=$(date +%s)
check "after a disconnect the next request is served (got $s)" test "$s" = 200
check "the abandoned generation was cancelled (next answer in $((t1 - t0)) s, not ~9)" \
    test $((t1 - t0)) -lt 5

# The same with a client waiting for a whole answer (non-streaming): its
# connection is watched while it runs.
curl -sS -m 1 -H "$auth" -H 'Content-Type: application/json' \
    --data-binary "$(chat_body 'long story' ',"max_tokens":200')" \
    "http://127.0.0.1:$port/v1/chat/completions" >/dev/null 2>&1
t0=$(date +%s)
s=$(req "$tmp/d3" POST /v1/chat/completions "$(chat_body 'short' ',"max_tokens":2')" -H "$auth")
t1=$(date +%s)
check "after a non-streaming hang-up the next request is served (got $s)" test "$s" = 200
check "the abandoned non-streaming generation was cancelled (next answer in $((t1 - t0)) s, not ~9)" \
    test $((t1 - t0)) -lt 5
req "$tmp/h2" GET /health >/dev/null
check "both hang-ups counted as abandoned ($(cat "$tmp/h2"))" has "$tmp/h2" '"abandoned":2'

# Queue bound: two long requests occupy the queue, a third gets 429.
for n in 1 2; do
    curl -sS -m 30 -o "$tmp/q$n" -H "$auth" -H 'Content-Type: application/json' \
        --data-binary "$(chat_body 'long' ',"max_tokens":40')" \
        "http://127.0.0.1:$port/v1/chat/completions" &
    cpids="$cpids $!"
done
sleep 0.5
curl -sS -m 30 -D "$tmp/q3.h" -o "$tmp/q3" -w '%{http_code}' -H "$auth" -H 'Content-Type: application/json' \
    --data-binary "$(chat_body 'long' ',"max_tokens":40')" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/q3.s"
check "queue full 429 (got $(cat "$tmp/q3.s"))" test "$(cat "$tmp/q3.s")" = 429
check "429 Retry-After" grep -qi '^retry-after: ' "$tmp/q3.h"
check "429 error shape" is_error_shape "$tmp/q3"
wait_clients
check "queued requests complete" has "$tmp/q2" '"completion_tokens":40'
# SIGTERM with a stream running and a request waiting: the stream ends with
# a cancelled error event and [DONE], the waiting request gets 503.
curl -sS -N -m 30 -H "$auth" -H 'Content-Type: application/json' \
    --data-binary "$(chat_body 'long' ',"max_tokens":100,"stream":true')" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/t1" 2>/dev/null &
cpids="$cpids $!"
sleep 0.3
curl -sS -m 30 -o "$tmp/t2" -w '%{http_code}' -H "$auth" -H 'Content-Type: application/json' \
    --data-binary "$(chat_body 'waiting' ',"max_tokens":100')" \
    "http://127.0.0.1:$port/v1/chat/completions" >"$tmp/t2.s" 2>/dev/null &
cpids="$cpids $!"
sleep 0.5
stop
wait_clients
check "stopping: the running stream ends with a cancelled event" has "$tmp/t1" '^data: {"error":{.*"code":"cancelled"'
check "stopping: then [DONE]" test "$(tail -n 2 "$tmp/t1" | head -n 1)" = "data: [DONE]"
check "stopping: the waiting request gets 503 (got $(cat "$tmp/t2.s"))" test "$(cat "$tmp/t2.s")" = 503
check "stopping: 503 error shape" is_error_shape "$tmp/t2"

# Safety: a non-loopback host needs a key.
"$cli" serve -m "$model" --host 0.0.0.0 --port 0 >"$tmp/nl.out" 2>"$tmp/nl.err"
status=$?
check "non-loopback host without a key refused (status $status)" test "$status" -eq 1
check "... with a message" has "$tmp/nl.err" 'api-key'
# A host that is no address is told so, not sent after a key.
"$cli" serve -m "$model" --host 999.1.1.1 --port 0 >"$tmp/na.out" 2>"$tmp/na.err"
status=$?
check "a host that is no address refused (status $status)" test "$status" -eq 1
check "... saying so" has "$tmp/na.err" '999.1.1.1 is not an IP address'
check "... not asking for a key" sh -c "! grep -q api-key '$tmp/na.err'"
# What --host is read for (once, tern_server_host_read): the URL printed,
# whether a key is needed, and whether any Host is taken.
start lo2 --host 127.0.0.2
check "another loopback address needs no key" has "$tmp/lo2.out" 'on http://127\.0\.0\.2:[0-9]*/v1$'
stop
start lname --host localhost
check "localhost binds 127.0.0.1" has "$tmp/lname.out" 'on http://127\.0\.0\.1:[0-9]*/v1$'
check "... which answers" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/models")" = 200
stop
# (A machine without IPv6 cannot bind ::1: then this one is skipped.)
"$cli" serve -m "$model" --host ::1 --port 0 -t 1 >"$tmp/v6.out" 2>"$tmp/v6.err" &
spid=$!
pids="$pids $spid"
i=0
while [ $i -lt 300 ] && ! grep -q '^port ' "$tmp/v6.out" && kill -0 "$spid" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
if grep -q '^port ' "$tmp/v6.out"; then
    check "an IPv6 host is in brackets in the URL" has "$tmp/v6.out" 'on http://\[::1\]:[0-9]*/v1$'
    name=v6
    stop
else
    kill "$spid" 2>/dev/null
    wait "$spid"
    echo "note: no IPv6 loopback here: $(cat "$tmp/v6.err")"
fi
start wild --host 0.0.0.0 --api-key k
check "a wildcard host takes any Host (it has a key)" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example' -H 'Authorization: Bearer k' \
        "http://127.0.0.1:$port/v1/models")" = 200
stop
start narrow --host 127.0.0.1
check "a loopback host refuses a foreign Host" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "http://127.0.0.1:$port/v1/models")" = 403
stop

checks_done serve
