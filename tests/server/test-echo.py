#!/usr/bin/env python3
"""Completions for evaluation harnesses (docs/SERVER.md, "Scoring a prompt").

- echo with logprobs: tokens, token_logprobs, top_logprobs and text_offset
  list the prompt's tokens first (the first one's logprob and top_logprobs
  null), then the answer's; each prompt entry is what a second path reports
  for the same prefix (teacher forcing: the prefix as token ids, max_tokens
  1, the next prompt token forced by a logit_bias, whose logprob is the
  model's); prompts of 1, rows - 1, rows, rows + 1 and 3 rows + 1 tokens
  (rows: the server's scoring step for this vocabulary); speculation on and
  off the same; streamed the same as not.
- max_tokens 0: the prompt alone (echo) or nothing (no echo), finish
  "length", no tokens generated.
- prompt as token ids, or a list of one of them; 65 prompts, ids out of
  the vocabulary, 1e30, nested arrays, mixed types, 100,000 ids: 400s naming
  the prompt (and the index). Several prompts: test-prompts.py.
- lm-eval's loglikelihood request end to end: the continuation's summed
  logprob and is_greedy as lm-eval computes them, against the teacher-forced
  numbers.
- The server's memory stays flat over 300 echo requests on a long prompt.

A tiny random-weight Qwen3-architecture model with the real Qwen3 vocabulary."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

T0 = time.time()


def section(name):
    print("[%4.0fs] %s" % (time.time() - T0, name), flush=True)


checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("echo")
vocab = serverlib.real_vocab("qwen3")
model = serverlib.make_model(tmp, name="qwen3", vocab=vocab, arch="qwen3")
srv = serverlib.Server(tmp, "echo", model)

with open(vocab) as f:
    doc = json.load(f)
    N_VOCAB = len(doc["model"]["vocab"]) + len(
        [t for t in doc.get("added_tokens", []) if t["id"] >= len(doc["model"]["vocab"])])
# The rows one scoring step holds (TN_PROMPT_LOGITS_FLOATS / n_vocab, 1..64).
ROWS = max(1, min(64, (8 * 1024 * 1024) // N_VOCAB))

TEXT = ("The quick brown fox jumps over the lazy dog. " * 24)
IDS = serverlib.token_ids(model, TEXT)
check(len(IDS) >= 3 * ROWS + 1, "the text is long enough: %d ids for %d rows" % (len(IDS), ROWS))


def complete(body, stream=False):
    """(status, text, logprobs dict or None, doc, raw): streams gathered."""
    body = dict(body, stream=stream)
    status, _, doc, raw = srv.post("/v1/completions", body)
    if status != 200 or not stream:
        ch = doc["choices"][0] if status == 200 else {}
        return status, ch.get("text"), ch.get("logprobs"), doc, raw
    text, lp, last = "", None, None
    for e in serverlib.sse_events(raw):
        if e == "[DONE]":
            continue
        ev = json.loads(e)
        if not ev["choices"]:
            continue
        last = ev
        text += ev["choices"][0]["text"]
        if ev["choices"][0].get("logprobs"):
            lp = lp or {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
            for k in lp:
                lp[k] += ev["choices"][0]["logprobs"][k]
    return status, text, lp, last, raw


def score(ids, k=1, max_tokens=0, **extra):
    body = {"prompt": ids, "echo": True, "logprobs": k, "max_tokens": max_tokens,
            "temperature": 0}
    body.update(extra)
    return complete(body)


def forced(prefix, token):
    """The logprob of token after prefix, through the answer's path."""
    status, _, lp, _, raw = complete({"prompt": prefix, "max_tokens": 1, "logprobs": 1,
                                      "temperature": 0, "logit_bias": {str(token): 100}})
    if status != 200 or not lp:
        check(False, "forced request: %s %r" % (status, raw[:300]))
        return None
    return lp["token_logprobs"][0]


# --- teacher forcing over the longest prompt ---------------------------------------
section('teacher forcing over the longest prompt')
LONG = IDS[:3 * ROWS + 1]
status, text, lp, d, raw = score(LONG, k=3)
check(status == 200 and lp and len(lp["tokens"]) == len(LONG),
      "echo, max_tokens 0: one entry per prompt token (%s): %r" % (status, raw[:300]))
lp = lp or {"token_logprobs": [None] * len(LONG), "top_logprobs": [None] + [{}] * len(LONG),
            "tokens": [], "text_offset": []}
check(lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None,
      "the first prompt token: null, null: %r %r" % (lp["token_logprobs"][:2],
                                                     lp["top_logprobs"][:2]))
check(status == 200 and d["choices"][0]["finish_reason"] == "length" and
      d["usage"]["completion_tokens"] == 0 and d["usage"]["prompt_tokens"] == len(LONG),
      "max_tokens 0: finish length, no completion tokens: %r" % (d or {}).get("usage"))
wrong = []
for i in range(1, len(LONG)):
    want = forced(LONG[:i], LONG[i])
    if lp["token_logprobs"][i] != want:
        wrong.append((i, lp["token_logprobs"][i], want))
check(not wrong, "prompt logprobs == teacher forcing at all %d positions: %r"
      % (len(LONG) - 1, wrong[:5]))
check(all(len(t) <= 4 and all(v <= 0 for v in t.values()) for t in lp["top_logprobs"][1:]),
      "top_logprobs: dicts of up to 3 (+ the token): %r" % lp["top_logprobs"][1:3])
check(text == TEXT[:len(text)] and len(text) > 0,
      "the echo is the prompt's text: %r" % (text or "")[:80])

# --- lengths around the scoring step: prefixes of the same numbers -----------
section('lengths around the scoring step: prefixes of the same numbers')
for n in (1, 2, ROWS - 1, ROWS, ROWS + 1):
    status, _, p_lp, _, raw = score(LONG[:n], k=3)
    check(status == 200 and p_lp and p_lp["token_logprobs"] == lp["token_logprobs"][:n] and
          p_lp["top_logprobs"] == lp["top_logprobs"][:n],
          "%d tokens: the long prompt's first %d entries (%s): %r" % (n, n, status, raw[:300]))

# --- with an answer: the prompt's entries, then the answer's -----------------
section("with an answer: the prompt's entries, then the answer's")
status, text, a_lp, d, raw = score(LONG[:40], k=2, max_tokens=5)
check(status == 200 and a_lp and len(a_lp["tokens"]) == 45 and
      a_lp["token_logprobs"][:40] == lp["token_logprobs"][:40],
      "echo + 5 tokens: 40 prompt entries then 5 (%s): %r" % (status, raw[:300]))
status, plain, p_lp, _, raw = complete({"prompt": LONG[:40], "max_tokens": 5, "logprobs": 2,
                                        "temperature": 0})
if status == 200 and a_lp and p_lp:
    check(a_lp["token_logprobs"][40:] == p_lp["token_logprobs"] and text.endswith(plain),
          "the answer's entries are those without echo")
    check(a_lp["text_offset"][40] == len(text) - len(plain),
          "the answer's first offset follows the echo: %r" % a_lp["text_offset"][38:42])
s_status, s_text, s_lp, _, raw = complete({"prompt": LONG[:40], "echo": True, "logprobs": 2,
                                           "max_tokens": 5, "temperature": 0}, stream=True)
check(s_status == 200 and s_text == text and s_lp == a_lp,
      "streamed == not streamed: %r" % raw[:300])

# --- speculation does not change the numbers ---------------------------------
section('speculation does not change the numbers')
outs = []
for spec in (False, "lookup"):
    status, _, s_lp, _, raw = score(LONG, k=2, max_tokens=8, tern={"speculation": spec})
    outs.append(s_lp if status == 200 else raw[:200])
check(outs[0] == outs[1], "speculation on == off: %r" % (str(outs)[:300],))

# --- text offsets and the string prompt --------------------------------------
section('text offsets and the string prompt')
status, text, t_lp, _, raw = complete({"prompt": TEXT[:60], "echo": True, "logprobs": 0,
                                       "max_tokens": 0})
if status == 200 and t_lp:
    ok = text == TEXT[:60] and t_lp["text_offset"][0] == 0
    for i, t in enumerate(t_lp["tokens"]):
        ok = ok and text[t_lp["text_offset"][i]:].startswith(t)
    check(ok, "string prompt: each token at its offset: %r %r" % (t_lp["tokens"][:5],
                                                                    t_lp["text_offset"][:5]))
    check(all(d == {} for d in t_lp["top_logprobs"][1:]), "logprobs 0: empty dicts")
else:
    check(False, "string prompt, echo, max_tokens 0: %s %r" % (status, raw[:300]))

# --- max_tokens 0 without echo; echo without logprobs ------------------------
section('max_tokens 0 without echo; echo without logprobs')
status, text, n_lp, d, raw = complete({"prompt": "Hello", "max_tokens": 0})
check(status == 200 and text == "" and n_lp is None and
      d["choices"][0]["finish_reason"] == "length" and d["usage"]["completion_tokens"] == 0,
      "max_tokens 0, no echo: empty text, length: %r" % raw[:300])
status, text, n_lp, d, raw = complete({"prompt": "Hello", "max_tokens": 0, "echo": True})
check(status == 200 and text == "Hello" and n_lp is None, "echo alone: %r" % raw[:300])
status, _, _, _, raw = complete({"prompt": [IDS[:5]], "max_tokens": 0, "echo": True,
                                 "logprobs": 1})
check(status == 200, "a list of one id list is one prompt: %s %r" % (status, raw[:300]))
status, _, _, _, raw = complete({"prompt": ["Hello"], "max_tokens": 0, "echo": True,
                                 "logprobs": 1})
check(status == 200, "a list of one string is one prompt: %s %r" % (status, raw[:300]))
status, _, d, raw = srv.post("/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})
check(status == 400 and (d or {}).get("error", {}).get("param") == "max_tokens",
      "chat max_tokens 0: 400: %r" % raw)

# --- lm-eval's loglikelihood, as lm-eval reads the answer -------------------
section("lm-eval's loglikelihood, as lm-eval reads the answer")
CTX, CONT = "The quick brown fox jumps over the", " lazy dog"
ctx_ids = serverlib.token_ids(model, CTX)
whole = serverlib.token_ids(model, CTX + CONT)
ctxlen = len(ctx_ids)
for prompt in (CTX + CONT, [whole]):
    status, _, e_lp, _, raw = complete({"prompt": prompt, "echo": True, "logprobs": 1,
                                        "max_tokens": 0, "temperature": 0, "seed": 1234})
    if status != 200 or not e_lp:
        check(False, "lm-eval request: %s %r" % (status, raw[:300]))
        continue
    # lm-eval's local-completions parse_logprobs
    continuation_logprobs = sum(e_lp["token_logprobs"][ctxlen:])
    is_greedy = True
    for tok, top in zip(e_lp["tokens"][ctxlen:], e_lp["top_logprobs"][ctxlen:]):
        if tok != max(top, key=top.get):
            is_greedy = False
            break
    want = sum(forced(whole[:i], whole[i]) for i in range(ctxlen, len(whole)))
    check(continuation_logprobs == want,
          "loglikelihood %r == teacher forcing %r" % (continuation_logprobs, want))
    greedy = True
    for i in range(ctxlen, len(whole)):
        st, _, g_lp, _, _ = complete({"prompt": whole[:i], "max_tokens": 1, "logprobs": 1,
                                      "temperature": 0})
        greedy = greedy and st == 200 and g_lp["tokens"][0] == e_lp["tokens"][i]
    check(is_greedy == greedy, "is_greedy %s == greedy decoding's %s" % (is_greedy, greedy))

# --- refusals ----------------------------------------------------------------
section('refusals')
refusals = [
    ([1, -1], "prompt[1]"),
    ([0, N_VOCAB], "prompt[1]"),
    ([1e30], "prompt[0]"),
    ([1.5], "prompt[0]"),
    ([[1, [2]]], "prompt[0][1]"),
    ([1, "a"], "prompt[1]"),
    ([True], "prompt[0]"),
    ([], "empty"),
    ([IDS[:3]] * 65, "65 prompts"),
    ({"a": 1}, "prompt must be"),
]
for prompt, words in refusals:
    status, _, d, raw = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": 1})
    err = (d or {}).get("error") or {}
    check(status == 400 and err.get("param") == "prompt" and words in err.get("message", ""),
          "prompt %r: 400 naming %r: %s %r" % (str(prompt)[:40], words, status, raw[:300]))
status, _, d, raw = srv.post("/v1/completions", {"prompt": [5] * 100000, "max_tokens": 1,
                                                 "echo": True, "logprobs": 1})
check(status == 400 and (d or {}).get("error", {}).get("code") == "context_length_exceeded",
      "100,000 ids: context_length_exceeded: %s %r" % (status, raw[:300]))
status, _, d, raw = srv.post("/v1/completions", {"prompt": "x", "max_tokens": -1})
check(status == 400 and (d or {}).get("error", {}).get("param") == "max_tokens",
      "max_tokens -1: %r" % raw[:200])

check(srv.stop() == 0, "the server stops cleanly: " + srv.stderr()[-2000:])
# --- memory over 300 echo requests on a long prompt -------------------------
section('memory over 300 echo requests on a long prompt')
# A server of its own, AddressSanitizer's quarantine off (as soak.py): it
# keeps freed memory mapped, and each request frees its 32 MiB of rows.
opts = os.environ.get("ASAN_OPTIONS", "")
os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
    "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
srv = serverlib.Server(tmp, "echo-rss", model)
os.environ["ASAN_OPTIONS"] = opts


def rss_kb():
    with open("/proc/%d/status" % srv.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ECHO_RSS_REQUESTS=300 for the figure in docs/SERVER.md; the suite runs
# fewer (each request computes every row's 151,936 logits under ASan).
n_req = int(os.environ.get("ECHO_RSS_REQUESTS", "40"))
long_ids = (IDS * 8)[:int(os.environ.get("ECHO_RSS_TOKENS", "256"))]
rss = []
for i in range(n_req):
    status, _, _, _, raw = score(long_ids, k=5)
    if status != 200:
        check(False, "echo request %d: %s %r" % (i, status, raw[:200]))
        break
    if i in (n_req // 4 - 1, n_req - 1):
        rss.append(rss_kb())
print("RSS after %d and %d echo requests of %d tokens: %s kB"
      % (n_req // 4, n_req, len(long_ids), rss))
check(len(rss) == 2 and rss[1] - rss[0] < 8 * 1024,
      "RSS flat over the last three quarters (< 8 MB growth): %r kB" % rss)

check(srv.stop() == 0, "the second server stops cleanly: " + srv.stderr()[-2000:])
checks.finish()
