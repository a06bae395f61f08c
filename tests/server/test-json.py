#!/usr/bin/env python3
"""logit_bias and response_format (docs/SERVER.md, "Constrained output").

- logit_bias {"token id": bias}: -100 bans the greedy answer's first token,
  +100 forces one, on the single-turn and conversation paths, streamed or
  not, for chat and completions; hostile maps are 400s naming logit_bias;
  greedy answers are the same with speculation on and off.
- response_format {"type": "json_object"}: the answer is one JSON object
  (python's json.loads), greedy and sampled, streamed or not; cut by
  max_tokens it is finish_reason "length". An empty json_schema (which
  would allow anything) and unknown types are 400s naming response_format
  (test-json-schema.py has the rest of json_schema).

A tiny random-weight Qwen3-architecture model with the real Qwen3 vocabulary."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("json")
model = serverlib.make_model(tmp, name="qwen3", vocab=serverlib.real_vocab("qwen3"), arch="qwen3")
srv = serverlib.Server(tmp, "json", model)


def token_ids(text):
    return serverlib.token_ids(model, text)


MESSAGES = [{"role": "user", "content": "Write something."}]


def chat(max_tokens=1, stream=False, messages=None, **extra):
    body = {"messages": messages or MESSAGES, "max_tokens": max_tokens, "stream": stream}
    body.update(extra)
    status, _, doc, raw = srv.post("/v1/chat/completions", body)
    if stream:
        if status != 200:
            return status, None, None, raw
        text, finish = "", None
        for e in serverlib.sse_events(raw):
            if e == "[DONE]":
                continue
            ch = json.loads(e)["choices"]
            if ch:
                text += ch[0]["delta"].get("content") or ""
                finish = ch[0].get("finish_reason") or finish
        return status, text, finish, raw
    if status != 200 or not doc:
        return status, None, None, raw
    msg = doc["choices"][0]["message"]
    return status, msg.get("content") or "", doc["choices"][0]["finish_reason"], raw


def complete(max_tokens=1, **extra):
    body = {"prompt": "Once upon a time", "max_tokens": max_tokens}
    body.update(extra)
    status, _, doc, raw = srv.post("/v1/completions", body)
    if status != 200 or not doc:
        return status, None, raw
    return status, doc["choices"][0]["text"], raw


# --- logit_bias ---------------------------------------------------------------
status, first, _, raw = chat()
check(status == 200 and first, "a greedy first token (%s): %r" % (status, raw[:300]))
ids = token_ids(first)
check(len(ids) == 1, "the first token %r is one token: %r" % (first, ids))
best = ids[0]
status, banned, _, raw = chat(logit_bias={str(best): -100})
check(status == 200 and banned is not None and banned != first,
      "banning token %d (%r) changes the first token: %r" % (best, first, banned))
status, banned_s, _, _ = chat(stream=True, logit_bias={str(best): -100})
check(banned_s == banned, "streamed, the ban gives the same token: %r %r" % (banned_s, banned))

forced_id = token_ids('{"')
check(len(forced_id) == 1, "'{\"' is one token: %r" % forced_id)
forced_id = forced_id[0]
for label, extra in [("single-turn", {}), ("streamed", {"stream": True}),
                     ("conversation", {"tern": {"single_turn": False}}),
                     ("sampled", {"temperature": 1, "seed": 5})]:
    status, text, _, raw = chat(logit_bias={str(forced_id): 100}, **extra)
    check(status == 200 and text == '{"', "%s: +100 forces token %d: %r %r"
          % (label, forced_id, text, raw[:200]))
status, text, raw = complete(logit_bias={str(forced_id): 100})
check(status == 200 and text == '{"', "completions: +100 forces it: %r" % raw[:300])
status, text, raw = complete()
check(status == 200 and text != '{"', "completions without the bias: %r" % text)
# A bias of 0, and the same token twice in other spellings, change nothing.
status, text, _, _ = chat(logit_bias={str(best): 0})
check(text == first, "a zero bias changes nothing: %r" % text)

# Speculation on == off with a bias (greedy), on a prompt that repeats
# itself so that prompt lookup drafts.
# A verify step without the bias would take the model's own token where the
# forced " x" was drafted.
rep = [{"role": "user", "content": "one two three four five " * 12 + "x" + " x" * 40}]
x_id = token_ids(" x")
check(len(x_id) == 1, "' x' is one token: %r" % x_id)
drafted = 0
for bias in [{str(best): -100}, {str(forced_id): 5, str(best): 3}, {str(x_id[0]): 100}]:
    outs = []
    for spec in [False, "lookup"]:
        status, _, doc, raw = srv.post("/v1/chat/completions", {
            "messages": rep, "max_tokens": 40, "logit_bias": bias, "tern": {"speculation": spec}})
        check(status == 200, "speculation %s: %d %r" % (spec, status, raw[:200]))
        outs.append(doc["choices"][0]["message"]["content"] if status == 200 else None)
        if spec and status == 200:
            drafted += doc["usage"].get("timings", {}).get("drafted_tokens", 0)
    check(outs[0] == outs[1], "speculation on == off with bias %r: %r vs %r" % (bias, *outs))
check(drafted > 0, "prompt lookup drafted (%d tokens)" % drafted)

hostile = [
    ("a string key", {"abc": 1}),
    ("a negative id", {"-1": 1}),
    ("a signed id", {"+5": 1}),
    ("a fractional id", {"5.0": 1}),
    ("an exponent id", {"1e3": 1}),
    ("an empty key", {"": 1}),
    ("a spaced id", {" 5": 1}),
    ("an id beyond the vocabulary", {"999999999": 1}),
    ("a huge id", {"99999999999999999999": 1}),
    ("a bias above 100", {"5": 100.5}),
    ("a bias below -100", {"5": -101}),
    ("a string bias", {"5": "10"}),
    ("a NaN-like string", {"5": "NaN"}),
    ("a null bias", {"5": None}),
    ("a nested object", {"5": {"6": 1}}),
    ("an array bias", {"5": [1]}),
    ("a boolean bias", {"5": True}),
    ("2000 entries", {str(i): 1 for i in range(2000)}),
]
for label, bias in hostile:
    status, _, doc, raw = srv.post("/v1/chat/completions",
                                   {"messages": MESSAGES, "max_tokens": 1, "logit_bias": bias})
    param = doc.get("error", {}).get("param") if isinstance(doc, dict) else None
    check(status == 400 and param == "logit_bias",
          "logit_bias %s: 400 naming it (got %s %r)" % (label, status, raw[:200]))
# 100000 entries that are really distinct: the body scan or the count refuses.
big = "{" + ",".join('"%d":1' % i for i in range(100000)) + "}"
for label, text in [("1e400", '{"5": 1e400}'), ("-1e400", '{"5": -1e400}'),
                    ("an array", "[[5, 1]]"), ("a number", "5"), ("a string", '"5"'),
                    ("100000 distinct entries", big)]:
    body = ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1, '
            '"logit_bias": %s}' % text).encode()
    status, _, doc, raw = srv.post("/v1/chat/completions", body)
    param = doc.get("error", {}).get("param") if isinstance(doc, dict) else None
    check(status == 400 and param == "logit_bias",
          "logit_bias %s: 400 naming it (got %s %r)" % (label, status, raw[:200]))
status, text, _, _ = chat(logit_bias=None)
check(status == 200 and text == first, "logit_bias null is none: %r" % text)
status, text, _, _ = chat(logit_bias={})
check(status == 200 and text == first, "logit_bias {} is none: %r" % text)

# --- response_format ------------------------------------------------------------
for label, rf, want in [("text", {"type": "text"}, 200), ("null", None, 200),
                        ("json_schema", {"type": "json_schema",
                                         "json_schema": {"name": "x", "schema": {}}}, 400),
                        ("an unknown type", {"type": "xml"}, 400),
                        ("no type", {}, 400), ("a string", "json_object", 400),
                        ("a number type", {"type": 5}, 400)]:
    status, _, doc, raw = srv.post("/v1/chat/completions",
                                   {"messages": MESSAGES, "max_tokens": 1, "response_format": rf})
    param = doc.get("error", {}).get("param") if isinstance(doc, dict) else None
    check(status == want and (want == 200 or param == "response_format"),
          "response_format %s: %d (got %s %r)" % (label, want, status, raw[:200]))
    if label == "json_schema":
        msg = doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""
        check("json_schema" in msg and "\"type\"" in msg,
              "an empty json_schema is refused, saying what it lacks: %r" % msg)

JSON = {"type": "json_object"}
n_complete = 0
for temperature in [0, 1]:
    for seed in [1, 2, 3]:
        for stream in [False, True]:
            what = "temperature %s seed %d%s" % (temperature, seed, " streamed" if stream else "")
            status, text, finish, raw = chat(max_tokens=400, stream=stream, response_format=JSON,
                                             temperature=temperature, seed=seed)
            if not check(status == 200 and text is not None, "%s: %d %r"
                         % (what, status, raw[:300])):
                continue
            if finish == "length":
                check(not text.strip() or text.lstrip().startswith("{"),
                      "%s: cut short, an object: %r" % (what, text))
                continue
            check(finish == "stop", "%s: finish_reason %r" % (what, finish))
            try:
                doc = json.loads(text)
            except ValueError as e:
                check(False, "%s: not JSON (%s): %r" % (what, e, text))
                continue
            n_complete += check(isinstance(doc, dict), "%s: an object: %r" % (what, text))
        if temperature == 0:
            break  # the seed changes nothing greedy
check(n_complete >= 3, "%d answers were whole objects" % n_complete)

# The strings of the random model run long: a bias towards '":' (which
# only a key can take) and '"}' (which only a value string can) lets every
# answer close; without response_format the same bias gives text that is
# no JSON object.
closers = {str(i): 30 for i in token_ids('":') + token_ids('"}')}
check(len(closers) == 2, "'\":' and '\"}' are one token each: %r" % closers)
for seed in range(4):
    for stream in [False, True]:
        status, text, finish, raw = chat(max_tokens=300, stream=stream, response_format=JSON,
                                         temperature=1, seed=seed, logit_bias=closers)
        ok = status == 200 and finish == "stop"
        try:
            ok = ok and isinstance(json.loads(text), dict)
        except ValueError:
            ok = False
        check(ok, "seed %d%s, biased to close: a whole object: %s %r %r"
              % (seed, " streamed" if stream else "", finish, text, raw[:200]))
status, free, _, _ = chat(max_tokens=40, temperature=1, seed=0, logit_bias=closers)
try:
    free_is_object = isinstance(json.loads(free), dict)
except ValueError:
    free_is_object = False
check(status == 200 and not free_is_object, "without response_format: %r" % free)

# Conversation path and completions.
status, text, finish, raw = chat(max_tokens=300, response_format=JSON, temperature=1, seed=7,
                                 logit_bias=closers, tern={"single_turn": False})
try:
    ok = finish == "stop" and isinstance(json.loads(text), dict)
except (ValueError, TypeError):
    ok = False
check(ok, "conversation: a whole object: %s %r" % (finish, raw[:300]))
status, text, raw = complete(max_tokens=300, response_format=JSON, temperature=1, seed=7,
                             logit_bias=closers)
try:
    ok = isinstance(json.loads(text), dict)
except (ValueError, TypeError):
    ok = False
check(ok, "completions: a whole object: %r" % raw[:300])

# Cut short: "length", as OpenAI.
status, text, finish, raw = chat(max_tokens=2, response_format=JSON)
check(status == 200 and finish == "length" and (not text.strip() or
                                                 text.lstrip().startswith("{")),
      "max_tokens 2: finish_reason length: %r %r" % (finish, text))
# Speculation asked for: off for the request, the answer the same.
a = chat(max_tokens=60, response_format=JSON, logit_bias=closers)
b = chat(max_tokens=60, response_format=JSON, logit_bias=closers,
         tern={"speculation": "lookup"})
check(a[1] == b[1] and a[2] == b[2], "speculation asked for: the same answer: %r %r" % (a[1], b[1]))

check(srv.stop() == 0, "the server exits cleanly: " + srv.stderr()[-500:])
checks.finish()
