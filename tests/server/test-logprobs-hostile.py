#!/usr/bin/env python3
"""logprobs as a hostile client sends them (session 48's attack on the server's
logprobs; docs/SERVER.md, "Log-probabilities"):

- every value of top_logprobs and logprobs that is no count (1e9, 2^63, 1e400,
  1e-300, "5", true, [], {}) is a 400 naming it, streamed or not; null and -0
  are absent and 0, 20.0 is 20;
- logprobs with n > 1, with tools, with a json_schema (a recursive anyOf) and
  with an image on a text-only model: a 400 or an answer, never a 5xx;
- streams with logprobs dropped mid-answer leave the server answering;
- requests with logprobs racing the model's file being cut short: each one a
  200 or a 500 naming the file, /health a 200 or a 503, and the server stops
  cleanly.

A tiny random-weight Qwen3-architecture model with the real Qwen3 vocabulary."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("logprobs-hostile")
vocab = serverlib.real_vocab("qwen3")
model = serverlib.make_model(tmp, name="qwen3", vocab=vocab, arch="qwen3")
# The cut at the end faults a decode step, which libtern's guard turns into
# an error; ASan's own SIGBUS report stays off (as in test-conn.py).
os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":handle_sigbus=0"
srv = serverlib.Server(tmp, "logprobs-hostile", model)
MESSAGES = [{"role": "user", "content": "Write something."}]


def send(path, body_text):
    """(status, doc or None, raw) for a body given as JSON text."""
    status, _, doc, out = srv.post(path, body_text.encode())
    return status, doc, out


def answer_ok(status, doc, raw, stream):
    if stream:
        return status == 200 and b"data: [DONE]" in raw
    return status == 200 and doc and doc.get("choices")


# JSON text of each value: 1e400 is no float Python can write.
refused = ["-1", "21", "1e9", "9223372036854775808", "-9223372036854775808", "1e400",
           "1e-300", "1.5", '"5"', "true", "false", "[]", "{}"]
taken = {"null": 0, "-0.0": 0, "0": 0, "20.0": 20}
for stream in (False, True):
    for v in refused + list(taken):
        body = ('{"messages": %s, "max_tokens": 2, "stream": %s, "logprobs": true, '
                '"top_logprobs": %s}' % (json.dumps(MESSAGES), json.dumps(stream), v))
        status, doc, raw = send("/v1/chat/completions", body)
        if v in taken:
            ok = answer_ok(status, doc, raw, stream)
            if ok and not stream:
                entries = doc["choices"][0]["logprobs"]["content"]
                ok = entries and all(len(e["top_logprobs"]) == taken[v] for e in entries)
            check(ok, "top_logprobs %s (stream %s): an answer with %s alternatives: %s %r" %
                  (v, stream, taken[v], status, raw[:300]))
        else:
            err = (doc or {}).get("error") or {}
            check(status == 400 and err.get("param") == "top_logprobs",
                  "top_logprobs %s (stream %s): 400 naming top_logprobs: %s %r" %
                  (v, stream, status, raw[:300]))
    for v in ["1e9", "9223372036854775808", "1e400", "-0.5", '"3"', "[]", "{}"]:
        body = ('{"prompt": "Once upon", "max_tokens": 2, "stream": %s, "logprobs": %s}' %
                (json.dumps(stream), v))
        status, doc, raw = send("/v1/completions", body)
        err = (doc or {}).get("error") or {}
        check(status == 400 and err.get("param") == "logprobs",
              "completions logprobs %s (stream %s): 400 naming logprobs: %s %r" %
              (v, stream, status, raw[:300]))
    for v in ['"true"', "1", "0", "[]", "{}"]:
        body = ('{"messages": %s, "max_tokens": 2, "stream": %s, "logprobs": %s}' %
                (json.dumps(MESSAGES), json.dumps(stream), v))
        status, doc, raw = send("/v1/chat/completions", body)
        err = (doc or {}).get("error") or {}
        check(status == 400 and err.get("param") == "logprobs",
              "chat logprobs %s (stream %s): 400 naming logprobs: %s %r" %
              (v, stream, status, raw[:300]))

# With other features: an answer or a 400, never a 5xx.
tools = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"a": {"type": "string"}}}}}]
schema = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {
    "type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"$ref": "#"}]}},
    "required": ["a"]}}}
image = [{"role": "user", "content": [
    {"type": "text", "text": "hi"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]
for name, extra in [("n 2", {"n": 2}), ("n 128", {"n": 128}), ("tools", {"tools": tools}),
                    ("json_schema", {"response_format": schema}),
                    ("json_schema and tools", {"response_format": schema, "tools": tools}),
                    ("an image", {"messages": image})]:
    for stream in (False, True):
        body = {"messages": MESSAGES, "max_tokens": 12, "stream": stream, "logprobs": True,
                "top_logprobs": 20}
        body.update(extra)
        status, doc, raw = send("/v1/chat/completions", json.dumps(body))
        ok = status == 400 or answer_ok(status, doc, raw, stream)
        if ok and status == 200 and not stream:
            ok = doc["choices"][0].get("logprobs") is not None
        check(ok, "logprobs with %s (stream %s): an answer with entries or a 400: %s %r" %
              (name, stream, status, raw[:300]))

# Streams with 20 alternatives per token dropped after a few bytes.
body = json.dumps({"messages": MESSAGES, "max_tokens": 64, "stream": True, "logprobs": True,
                   "top_logprobs": 20}).encode()
for i in range(20):
    serverlib.drop_request(srv.port, "/v1/chat/completions", body, 100 + 50 * i, timeout=60)
status, doc, raw = send("/v1/chat/completions", json.dumps(
    {"messages": MESSAGES, "max_tokens": 2, "logprobs": True, "top_logprobs": 2}))
check(answer_ok(status, doc, raw, False), "answers after 20 dropped streams: %s %r" %
      (status, raw[:300]))

# Requests racing the model's file cut short under the server.
results = []


def racer(k):
    for j in range(4):
        body = json.dumps({"messages": MESSAGES, "max_tokens": 8, "stream": (k + j) % 2 == 1,
                           "logprobs": True, "top_logprobs": 5})
        try:
            status, _, out = srv.request("POST", "/v1/chat/completions", body, timeout=60)
            text = out.decode("utf-8", "replace")
            results.append(("chat", status, status == 200 or model in text))
        except OSError as e:
            results.append(("chat", repr(e), False))
        try:
            status, _, out = srv.request("GET", "/health", timeout=60)
            results.append(("health", status, status == 200 or model in out.decode()))
        except OSError as e:
            results.append(("health", repr(e), False))


threads = [threading.Thread(target=racer, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
time.sleep(0.3)
os.truncate(model, os.path.getsize(model) // 3)
for t in threads:
    t.join()
check(all(r[1] in (200, 500, 503) and r[2] for r in results),
      "racing the cut: every request a 200 or an error naming the file: %r" % results)
# One more request after the cut, in case the race ran ahead of it.
status, _, out = srv.request("POST", "/v1/chat/completions",
                             json.dumps({"messages": MESSAGES, "max_tokens": 2}))
check(status == 500 and model in out.decode("utf-8", "replace"),
      "a request after the cut: 500 naming the file: %s %r" % (status, out[:300]))
status, _, out = srv.request("GET", "/health")
check(status == 503 and model in out.decode("utf-8", "replace"),
      "/health after the race: 503 naming the file: %s %r" % (status, out[:300]))
check(srv.proc.poll() is None, "the server goes on: " + srv.stderr()[-1000:])
check(srv.stop() == 0, "the server stops cleanly: " + srv.stderr()[-3000:])
checks.finish()
