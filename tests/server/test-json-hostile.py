#!/usr/bin/env python3
"""logit_bias and response_format json_object, hostile (docs/SERVER.md,
"Constrained output"): odd token-id spellings and values are 400s naming
logit_bias; a repeated key is JSON's last-wins; a json_object that carries a
schema is a 400 (the schema would be silently ignored otherwise); json_object
with tools (stop strings: a 400), max_tokens 1, n > 1, thinking on, a bias against
every token that can open the object, a streamed client that goes away
mid-answer, and many constrained requests in a row: never a 500, a hang or
a crash, and the server exits cleanly (LeakSanitizer runs at its exit).
json_object on a gpt-oss model is a 400 naming response_format; a
vocabulary in which no token can continue the object mid-answer ends a
streamed answer with an error event and [DONE], and is a 400 unstreamed.

A tiny random-weight Qwen3-architecture model with the real Qwen3 vocabulary."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("json-hostile")
vocab = serverlib.real_vocab("qwen3")
model = serverlib.make_model(tmp, name="qwen3", vocab=vocab, arch="qwen3")
srv = serverlib.Server(tmp, "json-hostile", model)
MESSAGES = [{"role": "user", "content": "Write something."}]
JSON = {"type": "json_object"}


def post(**extra):
    body = {"messages": MESSAGES, "max_tokens": 1}
    body.update(extra)
    status, _, doc, raw = srv.post("/v1/chat/completions", body)
    return status, doc if isinstance(doc, dict) else {}, raw


def param_of(doc):
    return doc.get("error", {}).get("param")


def content(doc):
    m = doc["choices"][0]["message"]
    return m.get("content") or "", doc["choices"][0]["finish_reason"]


# --- logit_bias keys and values ------------------------------------------------
for key in ["01", "00", "007", "-0", "5 ", " 5", "\u0663", "\uff15", "5\u0000", "2147483648",
            "9223372036854775808", "18446744073709551616", "0x5", "5e0"]:
    status, doc, raw = post(logit_bias={key: 1})
    check(status == 400 and param_of(doc) == "logit_bias",
          "logit_bias key %r: 400 naming it (got %s %r)" % (key, status, raw[:200]))
for value in [True, False, None, "5", [], {}, [5]]:
    status, doc, raw = post(logit_bias={"5": value})
    check(status == 400 and param_of(doc) == "logit_bias",
          "logit_bias value %r: 400 naming it (got %s %r)" % (value, status, raw[:200]))
# 100,000 entries filling the body (well past the 1,024 allowed): a 400.
big = "{" + ",".join('"%d":1' % (i % 150000) for i in range(100000)) + "}"
body = ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1, "logit_bias": %s}'
        % big).encode()
status, _, doc, raw = srv.post("/v1/chat/completions", body)
check(status in (400, 413) and (status == 413 or param_of(doc or {}) == "logit_bias"),
      "100000 entries: 400/413 (got %s %r)" % (status, raw[:200]))

# A repeated key: JSON's last member wins (one bias, not both).
status, doc, _ = post()
first = content(doc)[0] if status == 200 else None
status, doc, raw = post(logit_bias={"13": 100})
forced = content(doc)[0] if status == 200 else None
dup = b'{"messages": [{"role": "user", "content": "Write something."}], "max_tokens": 1, ' \
      b'"logit_bias": {"13": -100, "13": 100}}'
status, _, ddoc, raw = srv.post("/v1/chat/completions", dup)
check(status == 200 and content(ddoc)[0] == forced and forced != first,
      "a repeated key, the last wins: %s %r (forced %r)" % (status, raw[:200], forced))

# --- response_format -----------------------------------------------------------
schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
for label, rf in [("an array", [JSON]), ("a string", "json_object"), ("a null type", {"type": None}),
                  ("a boolean", True),
                  ("json_object with a schema", {"type": "json_object", "schema": schema}),
                  ("json_object with a json_schema",
                   {"type": "json_object", "json_schema": {"name": "x", "schema": schema}})]:
    status, doc, raw = post(response_format=rf)
    check(status == 400 and param_of(doc) == "response_format",
          "response_format %s: 400 naming it (got %s %r)" % (label, status, raw[:200]))
    if "schema" in label:
        msg = doc.get("error", {}).get("message", "")
        check("schema" in msg, "the refusal names the schema: %r" % msg)

# n > 1 stays refused with json_object.
status, doc, raw = post(response_format=JSON, n=2)
check(status == 400 and param_of(doc) == "n", "n 2: 400 naming n (got %s %r)" % (status, raw[:200]))

# max_tokens 1: the start of an object, "length".
status, doc, raw = post(response_format=JSON, max_tokens=1)
text, finish = content(doc) if status == 200 else (None, None)
check(status == 200 and finish == "length" and text is not None and text.lstrip()[:1] in ("{", ""),
      "max_tokens 1: the start of an object, length: %s %r" % (status, raw[:300]))

# Speculation asked for with json_object: off, and usage says so (no drafts),
# on a prompt that prompt lookup drafts from without the constraint.
rep = [{"role": "user", "content": "one two three four five " * 12 + "x" + " x" * 40}]
x_ids = serverlib.token_ids(model, " x")
check(len(x_ids) == 1, "' x' is one token: %r" % x_ids)
x_bias = {str(x_ids[0]): 100} if x_ids else {}
drafted = {}
for rf in [None, JSON]:
    status, doc, raw = post(messages=rep, max_tokens=40, response_format=rf, logit_bias=x_bias,
                            tern={"speculation": "lookup"})
    timings = doc.get("usage", {}).get("timings", {}) if status == 200 else {}
    drafted[bool(rf)] = timings.get("drafted_tokens")
    check(status == 200 and "drafted_tokens" in timings,
          "lookup, response_format %r: 200 with timings (got %s %r)" % (rf, status, raw[:300]))
check(drafted[False] and drafted[True] == 0,
      "lookup drafts without json_object, none with it: %r" % drafted)

# Tools: answered, never a 500. Stop strings: refused (one would cut the
# object short), even one that never comes.
tools = [{"type": "function", "function": {"name": "f", "description": "d",
                                            "parameters": {"type": "object", "properties": {}}}}]
status, doc, raw = post(response_format=JSON, max_tokens=30, tools=tools)
check(status == 200, "json_object with tools: 200 (got %s %r)" % (status, raw[:300]))
for label, stop in [("a stop string", ['"']), ("a stop string that never comes", ["zzzz"])]:
    status, doc, raw = post(response_format=JSON, max_tokens=30, stop=stop)
    check(status == 400 and doc.get("error", {}).get("param") == "stop",
          "json_object with %s: 400 naming stop (got %s %r)" % (label, status, raw[:300]))

# Thinking on (the Qwen3 default): <think> is a control token, so the answer
# is the object in content, no reasoning.
status, doc, raw = post(response_format=JSON, max_tokens=200, tern={"thinking": True})
if check(status == 200, "thinking on: 200 (got %s %r)" % (status, raw[:300])):
    m = doc["choices"][0]["message"]
    check(not m.get("reasoning_content"), "thinking on: no reasoning: %r" % raw[:300])
    text = m.get("content") or ""
    check(text.lstrip()[:1] == "{", "thinking on: the content opens the object: %r" % text[:200])

# A -100 bias against every token that can open the object (those starting
# with '{' after whitespace, and the all-whitespace ones): a 200 (the
# constraint then takes the best allowed, biased or not) or a 400, never a
# hang or a 500.
vocab_doc = json.load(open(vocab))
pieces = vocab_doc["model"]["vocab"]
ws = set("\u0120\u010a\u0109\u010d")  # byte-level BPE's space, \n, \t, \r
openers = sorted(i for s, i in pieces.items()
                 if s.lstrip("".join(ws)).startswith("{") or (s and all(c in ws for c in s)))
ban = {str(i): -100 for i in openers[:1024]}
t0 = time.time()
status, doc, raw = post(response_format=JSON, max_tokens=20, logit_bias=ban)
check(status in (200, 400) and time.time() - t0 < 60,
      "every opener banned: 200 or 400, in time (got %s %r)" % (status, raw[:300]))

# A streamed client that goes away mid-answer: the server goes on serving.
req = json.dumps({"messages": MESSAGES, "max_tokens": 400, "stream": True,
                  "response_format": JSON, "temperature": 1, "seed": 3}).encode()
for _ in range(3):
    serverlib.drop_request(srv.port, "/v1/chat/completions", req, 200)
status, doc, raw = post(response_format=JSON, max_tokens=5)
check(status == 200, "after clients went away: 200 (got %s %r)" % (status, raw[:200]))

# Many constrained requests in a row (leaks show at the server's exit).
bad = 0
for i in range(int(os.environ.get("TERN_JSON_HOSTILE_N", "300"))):
    status, doc, raw = post(response_format=JSON, max_tokens=4, temperature=1, seed=i,
                            logit_bias={str(i % 1000): 5})
    bad += status != 200
check(bad == 0, "%d constrained requests in a row failed" % bad)

check(srv.stop() == 0, "the server exits cleanly: " + srv.stderr()[-2000:])

# A draft model (the model itself: its drafts know nothing of the bias, so
# a verify step that forgot it would keep them): greedy answers with a bias
# are the same with the drafter on and off; json_object turns it off.
dsrv = serverlib.Server(tmp, "json-hostile-draft", model, ["--spec", "draft:" + model])
srv = dsrv
status, doc, raw = post()
best_text = content(doc)[0] if status == 200 else ""
best_ids = serverlib.token_ids(model, best_text) if best_text else []
drafted = 0
for bias in [{str(best_ids[0]): -100} if best_ids else {}, x_bias,
             dict(x_bias, **{"13": 3})]:
    outs = []
    for spec in [False, "server"]:
        status, doc, raw = post(messages=rep, max_tokens=40, logit_bias=bias,
                                tern={"speculation": spec})
        outs.append(content(doc)[0] if status == 200 else None)
        if spec and status == 200:
            drafted += doc["usage"].get("timings", {}).get("drafted_tokens", 0)
    check(outs[0] is not None and outs[0] == outs[1],
          "draft model on == off with bias %r: %r vs %r" % (bias, *outs))
    # Sampled with a seed: answered either way (the draws differ with drafts).
    for spec in [False, "server"]:
        status, doc, raw = post(messages=rep, max_tokens=20, logit_bias=bias, temperature=1,
                                seed=4, tern={"speculation": spec})
        check(status == 200, "sampled, speculation %s: %s %r" % (spec, status, raw[:200]))
check(drafted > 0, "the draft model drafted (%d tokens)" % drafted)
status, doc, raw = post(messages=rep, max_tokens=40, response_format=JSON, logit_bias=x_bias,
                        tern={"speculation": "server"})
check(status == 200 and doc["usage"].get("timings", {}).get("drafted_tokens") == 0,
      "json_object with the draft model: no drafts (%s %r)" % (status, raw[:300]))
check(dsrv.stop() == 0, "the draft server exits cleanly: " + dsrv.stderr()[-2000:])

# --- gpt-oss ---------------------------------------------------------------------
# Its answers are in channels (analysis, then final): a constraint on the
# whole answer cannot hold. json_object is a 400 naming response_format, for
# chat and completions, streamed or not, before anything is generated.
oss = serverlib.make_model(tmp, name="gptoss", vocab=serverlib.real_vocab("gptoss"),
                           arch="gpt-oss",
                           extra=["--experts", "4", "--experts-used", "2", "--expert-ff", "64"])
osrv = serverlib.Server(tmp, "json-hostile-oss", oss)
for path, base in (("/v1/chat/completions", {"messages": MESSAGES}),
                   ("/v1/completions", {"prompt": "Once upon a time"})):
    for stream in (False, True):
        status, _, doc, raw = osrv.post(path, dict(base, max_tokens=4, stream=stream,
                                                   response_format=JSON))
        err = (doc or {}).get("error", {}) if isinstance(doc, dict) else {}
        check(status == 400 and err.get("param") == "response_format" and
              "gpt-oss" in err.get("message", ""),
              "gpt-oss %s, stream %s: 400 naming response_format (got %s %r)"
              % (path, stream, status, raw[:300]))
    status, _, doc, raw = osrv.post(path, dict(base, max_tokens=2))
    check(status == 200, "gpt-oss %s without it: answered (%s %r)" % (path, status, raw[:200]))
check(osrv.stop() == 0, "the gpt-oss server exits cleanly: " + osrv.stderr()[-2000:])

# --- no token can continue the object ----------------------------------------
# A vocabulary with no '"' and no '}' (byte-level, no byte tokens: those
# bytes have no token at all): after "{" only whitespace can follow, 32 of
# it at most (TN_JSON_PREFIX_MAX_SPACE), then nothing. The answer has begun
# by then: a streamed client gets its text, an error event that says why,
# then [DONE]; a client that waits gets the error alone.
nc = serverlib.make_model(tmp, name="noclose", vocab=serverlib.noclose_vocab(tmp))
check(serverlib.token_ids(nc, '{"a"}') == serverlib.token_ids(nc, "{a"),
      "the vocabulary has no token for '\"' or '}'")
nsrv = serverlib.Server(tmp, "json-hostile-noclose", nc)
body = {"messages": MESSAGES, "max_tokens": 200, "response_format": JSON}
status, _, doc, raw = nsrv.post("/v1/chat/completions", dict(body, stream=True))
events = serverlib.sse_events(raw) if status == 200 else []
text, errors = "", []
for e in events:
    d = json.loads(e) if e != "[DONE]" else {}
    if "error" in d:
        errors.append(d["error"])
    elif d.get("choices"):
        text += d["choices"][0]["delta"].get("content") or ""
check(status == 200 and "{" in text and len(errors) == 1 and events[-1] == "[DONE]" and
      "continue the JSON" in errors[0].get("message", "") and
      isinstance(json.loads(events[-2]), dict),
      "streamed, no token can continue: the text, one error event, [DONE] (got %s %r)"
      % (status, raw[-600:]))
status, _, doc, raw = nsrv.post("/v1/chat/completions", body)
err = (doc or {}).get("error", {}) if isinstance(doc, dict) else {}
check(status == 400 and "continue the JSON" in err.get("message", ""),
      "not streamed, no token can continue: a 400 that says why (got %s %r)"
      % (status, raw[:300]))
status, _, doc, raw = nsrv.post("/v1/chat/completions", dict(body, response_format=None,
                                                             max_tokens=3))
check(status == 200, "the same model without json_object: answered (%s %r)"
      % (status, raw[:200]))
check(nsrv.stop() == 0, "the no-close server exits cleanly: " + nsrv.stderr()[-2000:])
checks.finish()
