#!/usr/bin/env python3
"""Completions with several prompts, and echo's text_offset with a Llama 2
(SentencePiece) vocabulary (docs/SERVER.md, "Several prompts" and "Scoring
a prompt").

- text_offset of an echoed prompt (and, with Qwen3's byte-level vocabulary,
  control tokens at the start): each offset is where that token's text
  starts in the echoed text (a BOS the tokenizer added and the "▁" it put in
  front of a text hold none of it), and the characters the tokens add reach
  the text's length; string prompts with control tokens written in them, a
  leading space, new lines, characters spelled as bytes; prompts as ids.
- Several prompts, strings or token-id lists: one choice per prompt, index
  in order, each bit-identical (text, logprobs, finish_reason) to the prompt
  sent alone, greedy and sampled with a seed, echo, stop, max_tokens 0;
  usage summed.
- Bounds and refusals: 64 prompts answered, 65 refused naming the limit;
  prompts x max_tokens and the prompts' tokens over the bound; mixed kinds,
  an empty element, nesting: 400s naming prompt (and the index).
- Several prompts streamed: per index the text, logprobs (echo too) and
  finish_reason of the answer not streamed, the choices one after another,
  each one's last chunk alone with its finish_reason, usage last when asked
  for; the refusals before any chunk, a 2nd prompt that does not fit the
  context among them; a client that drops the stream stops the prompts left.
- A prompt over the context by its token count (past the tokenizer's
  bound): a 400 naming the first such, streamed or not, the prompts after
  it not encoded (counted in the server's debug log); prompts that fit are
  each encoded once, for the bound, and run from those tokens.
- A prompt that fails in the middle of its answer (json_object with a
  vocabulary that cannot close the object), streamed: the choices before
  it whole, its text with no finish_reason, one error event naming
  prompt[i] and how many tokens its choice had, [DONE], the prompts after
  it not run; not streamed: a 400 naming prompt[i], no choices.
- A client that leaves during the 2nd of 64 long prompts: the rest are not
  run, the next request is answered at once.
- The server stopped during prompt 0 of a stream: its choice has no
  finish_reason (it was cut, not finished), the cancelled error names it.

A tiny random-weight model with the real Llama 2 vocabulary (and one with
serverlib's noclose vocabulary)."""

import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("prompts")
vocab = serverlib.real_vocab("llama2")
model = serverlib.make_model(tmp, name="llama2", vocab=vocab, arch="llama")
# A delay per token: the dropped client's remaining prompts would take
# minutes, so an answer that comes at once shows they were not run.
srv = serverlib.Server(tmp, "prompts", model, args=["--debug-token-delay", "20"])


COMPLETIONS = "/v1/completions"


def token_bytes(t):
    """A completions "tokens" entry as bytes ("bytes:\\xe6" spells a piece
    of a character)."""
    if t.startswith("bytes:"):
        return bytes(int(h, 16) for h in t[6:].split("\\x")[1:])
    return t.encode()


CONTROL = ("<s>", "</s>", "<unk>")


def want_offsets(text, tokens, text_prompt, bos="<s>", spm=True, control=CONTROL):
    """Each token's offset (in characters) where its text starts in text,
    found by walking text with the tokens: a text prompt's first token is
    the BOS the tokenizer added, which holds none of it; SentencePiece put a
    "▁" in front of the text (and, in a text prompt, again after every
    control token in it), which the text does not hold: the next token that
    starts with a space has it; a control token is in a text prompt as
    written, and left out of an id prompt's echo. Also where the walk ended
    (bytes) and whether every token was found. bos: the BOS a text prompt
    starts with (None: the vocabulary adds none); spm: the vocabulary puts
    the "▁" in front."""
    tb = text.encode()
    at, offs, placed, prefix = 0, [], True, spm
    for i, t in enumerate(tokens):
        p = token_bytes(t)
        # characters before `at`: the bytes that start one
        offs.append(sum(1 for x in tb[:at] if x & 0xC0 != 0x80))
        if i == 0 and text_prompt and bos:
            check(t == bos, "a text prompt's first token is the BOS added: %r" % t)
        elif t in control and not text_prompt:
            pass
        elif prefix and p.startswith(b" ") and tb.startswith(p[1:], at):
            at += len(p) - 1
            prefix = False
        elif tb.startswith(p, at):
            at += len(p)
            prefix = spm and t in control
        else:
            placed = False
    return offs, at, placed


def echo_offsets(prompt, what, server=None, **vocab):
    server = server or srv
    status, _, doc, raw = server.post("/v1/completions", {
        "prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 0}, timeout=600)
    if not check(status == 200, "%s: echo answered: %s %r" % (what, status, raw[:300])):
        return
    ch = doc["choices"][0]
    text, lp = ch["text"], ch["logprobs"]
    if isinstance(prompt, str):
        check(text == prompt, "%s: the echo is the prompt: %r" % (what, text))
    offs, end, placed = want_offsets(text, lp["tokens"], isinstance(prompt, str), **vocab)
    check(placed and end == len(text.encode()),
          "%s: the tokens %r spell the echo %r" % (what, lp["tokens"], text))
    check(lp["text_offset"] == offs,
          "%s: text_offset %r, where the tokens %r start in %r: %r"
          % (what, lp["text_offset"], lp["tokens"], text, offs))
    o = lp["text_offset"]
    check(o[0] == 0 and all(a <= b for a, b in zip(o, o[1:])) and o[-1] <= len(text),
          "%s: offsets from 0, in order, inside the text: %r" % (what, o))


# --- Llama 2 echo offsets -----------------------------------------------------
print("llama 2 echo offsets", flush=True)
STRINGS = [
    "Hello world",
    " Hello world",
    "Hello  world\nnext line",
    "\nstarts on a new line",
    "héllo wörld 日本語 🦙",
    "<s>Hello world",
    "Hello</s> world",
    "a<s> b</s>c",
]
for s in STRINGS:
    echo_offsets(s, "string %r" % s)
for s in STRINGS[:5] + ["Hello world, again"]:
    ids = serverlib.token_ids(model, s)
    echo_offsets(ids, "ids of %r" % s)
# ids with control tokens inside: the echo leaves them out.
hello = serverlib.token_ids(model, "Hello")
world = serverlib.token_ids(model, " world")
echo_offsets(hello + [2, 1] + world[1:], "ids with </s><s> inside")
# A byte-level BPE vocabulary (Qwen3): no BOS, no "▁"; a control token at
# the start of a text prompt is in its echo too.
qwen = serverlib.make_model(tmp, name="qwen3", vocab=serverlib.real_vocab("qwen3"),
                            arch="qwen3")
qsrv = serverlib.Server(tmp, "prompts-qwen3", qwen)
QWEN = {"bos": None, "spm": False,
        "control": ("<|im_start|>", "<|im_end|>", "<|endoftext|>")}
for s in ["<|im_start|>user\nHi<|im_end|>", "Hello <|im_end|> world", " lead"]:
    echo_offsets(s, "qwen3 string %r" % s, qsrv, **QWEN)
    echo_offsets(serverlib.token_ids(qwen, s), "qwen3 ids of %r" % s, qsrv, **QWEN)
check(qsrv.stop() == 0, "the qwen3 server stops cleanly: " + qsrv.stderr()[-2000:])

# --- several prompts ----------------------------------------------------------
print("several prompts", flush=True)


def alone(prompt, body):
    status, _, doc, raw = srv.post(COMPLETIONS, dict(body, prompt=prompt), timeout=600)
    check(status == 200, "alone %r: %s %r" % (prompt, status, raw[:300]))
    return doc


def same_as_alone(prompts, body, what):
    status, _, doc, raw = srv.post(COMPLETIONS, dict(body, prompt=prompts), timeout=600)
    if not check(status == 200, "%s: answered: %s %r" % (what, status, raw[:300])):
        return
    chs = doc["choices"]
    check([c["index"] for c in chs] == list(range(len(prompts))),
          "%s: one choice per prompt, in order: %r" % (what, [c["index"] for c in chs]))
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for i, p in enumerate(prompts):
        one = alone(p, body)
        c1 = dict(one["choices"][0], index=i)
        check(chs[i] == c1, "%s: choice %d is the prompt alone's: %s vs %s"
              % (what, i, json.dumps(chs[i])[:400], json.dumps(c1)[:400]))
        for k in usage:
            usage[k] += one["usage"][k]
    for k in usage:
        check(doc["usage"][k] == usage[k],
              "%s: usage %s %d is the sum %d" % (what, k, doc["usage"][k], usage[k]))


PROMPTS = ["Once upon a time", "The capital of France is", "<s>1, 2, 3,", "x"]
same_as_alone(PROMPTS, {"max_tokens": 6, "temperature": 0}, "greedy")
same_as_alone(PROMPTS, {"max_tokens": 6, "temperature": 1.0, "seed": 7}, "sampled, seed 7")
same_as_alone(PROMPTS, {"max_tokens": 4, "temperature": 0, "echo": True, "logprobs": 2},
              "echo and logprobs")
same_as_alone(PROMPTS, {"max_tokens": 0, "echo": True, "logprobs": 1}, "max_tokens 0")
IDS = [serverlib.token_ids(model, p) for p in PROMPTS]
same_as_alone(IDS, {"max_tokens": 5, "temperature": 0, "logprobs": 1}, "token ids")
# A stop string that some answers reach: take one from the greedy answer.
_, _, d, _ = srv.post(COMPLETIONS, {"prompt": PROMPTS[0], "max_tokens": 6, "temperature": 0},
                     timeout=600)
stop = d["choices"][0]["text"][2:4] or "e"
same_as_alone(PROMPTS, {"max_tokens": 6, "temperature": 0, "stop": [stop], "logprobs": 1},
              "stop %r" % stop)
# One prompt in a list is that prompt.
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": ["x"], "max_tokens": 2, "temperature": 0},
                            timeout=600)
check(status == 200 and len(d["choices"]) == 1, "a list of one: %s %r" % (status, raw[:200]))

# --- bounds and refusals ------------------------------------------------------
print("bounds and refusals", flush=True)
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": ["p%d" % i for i in range(64)],
                                          "max_tokens": 1}, timeout=600)
check(status == 200 and [c["index"] for c in d["choices"]] == list(range(64)),
      "64 prompts: 64 choices: %s %r" % (status, raw[:200]))
refusals = [
    (["a"] * 65, "prompt", "65 prompts; one request may hold at most 64"),
    (["a", [1]], "prompt", "prompt[1] must be a string"),
    ([[1], "a"], "prompt", "prompt[1] must be a list of token ids"),
    (["a", 1], "prompt", "prompt[1] must be a string"),
    (["a", ""], "prompt", "prompt[1] is empty"),
    ([[1], []], "prompt", "prompt[1] is empty"),
    ([[1], [[2]]], "prompt", "prompt[1][0] must be a token id"),
    ([[1, 2], [3, "a"]], "prompt", "prompt[1][1] must be a token id"),
    ([["a"], ["b"]], "prompt", "prompt[0][0] must be a token id"),
    ([[1], [2, None]], "prompt", "prompt[1][1]"),
    ([], "prompt", "empty"),
    # "▁a" is one token: 4,202 each with the BOS and the last "▁", each over the context by
    # its count (not by the tokenizer's bound): refused naming the first,
    # before any is run (the 64 were encoded first: the total's bound
    # refused them; that bound is checked on a larger context below).
    (["a " * 4200] * 64, "prompt",
     "prompt[0]: the message is 4202 tokens; the context holds 1024"),
]
for prompt, param, words in refusals:
    status, _, d, raw = srv.post(COMPLETIONS, {"prompt": prompt, "max_tokens": 1}, timeout=600)
    err = (d or {}).get("error") or {}
    check(status == 400 and err.get("param") == param and words in err.get("message", ""),
          "prompt %s: 400 naming %r: %s %r" % (str(prompt)[:40], words, status, raw[:300]))
# Two prompts that their length alone refuses (a lone one's 400 comes from
# the tokenizer's bound, before it is encoded): refused so, naming the first,
# not after encoding both, which counted 480,004 tokens over the total bound.
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": [" a" * 240000] * 2, "max_tokens": 1},
                            timeout=600)
err = (d or {}).get("error") or {}
check(status == 400 and err.get("message", "").startswith("prompt[0]: the prompt is 480000 bytes")
      and "the context holds" in err.get("message", ""),
      "2 prompts each over the context by the bound: refused from it: %s %r"
      % (status, raw[:300]))
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": ["a", "b"], "max_tokens": 131073},
                            timeout=600)
err = (d or {}).get("error") or {}
check(status == 400 and err.get("param") == "max_tokens" and "at most 262144" in
      err.get("message", ""), "2 x 131073 tokens: 400 naming max_tokens: %r" % raw[:300])
# Chat is unchanged: a list is still no chat.
status, _, d, raw = srv.post("/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
check(status == 200, "chat still answers: %s %r" % (status, raw[:200]))

# --- several prompts streamed -------------------------------------------------
print("several prompts streamed", flush=True)


def joined_logprobs(chunks):
    lp = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for c in chunks:
        if c["choices"][0].get("logprobs"):
            for k in lp:
                lp[k] += c["choices"][0]["logprobs"][k]
    return lp


def streamed_as_answered(prompts, body, what, usage=True):
    """The stream of several prompts against the same request not
    streamed: per index the same text, log-probabilities and finish_reason,
    the choices one after another, the usage last."""
    status, _, doc, raw = srv.post(COMPLETIONS, dict(body, prompt=prompts), timeout=600)
    if not check(status == 200, "%s: answered: %s %r" % (what, status, raw[:300])):
        return
    sbody = dict(body, prompt=prompts)
    if usage:
        sbody["stream_options"] = {"include_usage": True}
    status, chunks, done, raw = srv.stream(COMPLETIONS, sbody, timeout=600)
    check(status != 200 or done, "%s: the stream ends in [DONE]: %r" % (what, raw[-200:]))
    if not check(status == 200, "%s: streamed: %s %r" % (what, status, raw[:300])):
        return
    usage_chunks = [c for c in chunks if "usage" in c and c.get("usage")]
    if usage:
        check(len(usage_chunks) == 1 and chunks[-1] is usage_chunks[0] and
              chunks[-1]["choices"] == [],
              "%s: one usage chunk, the last, with no choices: %r" % (what, chunks[-1:]))
        for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
            got = usage_chunks[0]["usage"][k] if usage_chunks else None
            check(got == doc["usage"][k], "%s: streamed usage %s %r is the answer's %r"
                  % (what, k, got, doc["usage"][k]))
        chunks = chunks[:-1]
    else:
        check(not usage_chunks, "%s: no usage without include_usage" % what)
    check(all(len(c["choices"]) == 1 and c["object"] == "text_completion" for c in chunks),
          "%s: each chunk one choice: %r" % (what, [c["choices"] for c in chunks][:3]))
    idx = [c["choices"][0]["index"] for c in chunks]
    check(idx == sorted(idx) and sorted(set(idx)) == list(range(len(prompts))),
          "%s: prompt 0's chunks, then prompt 1's, ...: %r" % (what, idx))
    for i, want in enumerate(doc["choices"]):
        mine = [c for c in chunks if c["choices"][0]["index"] == i]
        text = "".join(c["choices"][0]["text"] for c in mine)
        check(text == want["text"], "%s: choice %d streamed %r, answered %r"
              % (what, i, text, want["text"]))
        fin = [c["choices"][0]["finish_reason"] for c in mine]
        check(fin[-1:] == [want["finish_reason"]] and all(f is None for f in fin[:-1]),
              "%s: choice %d's last chunk alone has its finish_reason %r: %r"
              % (what, i, want["finish_reason"], fin))
        if want["logprobs"] is not None:
            got = joined_logprobs(mine)
            check(got == want["logprobs"], "%s: choice %d's logprobs streamed %s, answered %s"
                  % (what, i, json.dumps(got)[:300], json.dumps(want["logprobs"])[:300]))


streamed_as_answered(PROMPTS, {"max_tokens": 6, "temperature": 0}, "streamed greedy")
streamed_as_answered(PROMPTS, {"max_tokens": 6, "temperature": 0}, "streamed, no usage",
                     usage=False)
streamed_as_answered(PROMPTS, {"max_tokens": 5, "temperature": 1.0, "seed": 7},
                     "streamed sampled")
streamed_as_answered(PROMPTS, {"max_tokens": 4, "temperature": 0, "echo": True, "logprobs": 2},
                     "streamed echo and logprobs")
streamed_as_answered(PROMPTS, {"max_tokens": 0, "echo": True, "logprobs": 1},
                     "streamed max_tokens 0")
streamed_as_answered(IDS, {"max_tokens": 5, "temperature": 0, "logprobs": 1},
                     "streamed token ids")
streamed_as_answered(PROMPTS, {"max_tokens": 6, "temperature": 0, "stop": [stop],
                               "logprobs": 1}, "streamed stop %r" % stop)
# Some answers end on the limit, some on the stop string: finish reasons differ.
streamed_as_answered(["a", "b", "c"], {"max_tokens": 3, "temperature": 0, "stop": [" "]},
                     "streamed stop or length")

# Hostile: the refusals a list has are a stream's too, before any chunk;
# a prompt that does not fit after one that did: the first's chunks, its
# finish, then an error event naming prompt[1].
for prompt, param, words in [(["a"] * 65, "prompt", "at most 64"),
                             (["a", ""], "prompt", "prompt[1] is empty"),
                             (["a " * 4200, "b"], "prompt", "prompt[0]")]:
    status, _, _, raw = srv.stream(COMPLETIONS, {"prompt": prompt, "max_tokens": 1}, timeout=600)
    try:
        err = json.loads(raw).get("error") or {}
    except ValueError:
        err = {}
    check(status == 400 and err.get("param") == param and words in err.get("message", ""),
          "streamed %s: 400 naming %r: %s %r" % (str(prompt)[:30], words, status, raw[:300]))
# A 2nd prompt over the context by its count (past the tokenizer's bound):
# found when the prompts are counted, before the 1st runs: a 400 too (its
# chunks came first, then an error event).
status, _, _, raw = srv.stream(COMPLETIONS, {"prompt": ["x", "a " * 4200],
                                            "max_tokens": 2, "temperature": 0}, timeout=600)
try:
    err = json.loads(raw).get("error") or {}
except ValueError:
    err = {}
check(status == 400 and err.get("code") == "context_length_exceeded" and
      err.get("message", "").startswith("prompt[1]: the message is 4202 tokens"),
      "a 2nd prompt that does not fit: 400 naming it before any chunk: %s %r"
      % (status, raw[:400]))
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": ["a", "b"], "max_tokens": 1,
                                          "stream_options": {"include_usage": True}})
check(status == 400 and (d or {}).get("error", {}).get("param") == "stream_options",
      "stream_options without stream: still 400: %s %r" % (status, raw[:200]))
status, _, _, raw = srv.stream(COMPLETIONS, {"prompt": ["a", "b"], "max_tokens": 1,
                                            "stream_options": {"include_usage": "yes"}})
check(status == 400, "include_usage not a boolean: 400: %s %r" % (status, raw[:200]))

# A streaming client that leaves after its first chunk: the other prompts
# are not run, the next request is answered at once.
body = json.dumps({"prompt": ["tell me %d" % i for i in range(64)], "max_tokens": 2000,
                   "logit_bias": {"2": -100}, "stream": True}).encode()
s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
got = b""
try:
    while b"data: " not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
except OSError:
    pass
s.close()
check(got.startswith(b"HTTP/1.1 200") and b"data: " in got,
      "a stream of 64 prompts starts: %r" % got[:300])
t0 = time.time()
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": "x", "max_tokens": 1}, timeout=600)
waited = time.time() - t0
check(status == 200 and waited < 120,
      "after a dropped stream of 64 prompts the next is answered: %s after %.1f s"
      % (status, waited))

# --- a prompt that fails mid-answer ------------------------------------------
print("a prompt that fails mid-answer", flush=True)
# json_object with a vocabulary that cannot close an object: an answer
# fails once its object is open and 32 spaces are out (serverlib's
# noclose_vocab), after some of its text was sent. Prompt 0 fills the
# context two tokens in ("length", before any dead end); prompt 1 is short,
# so it runs into the dead end; prompt 2 would too, and is never run.
N_CTX = 256
nc = serverlib.make_model(tmp, name="noclose", vocab=serverlib.noclose_vocab(tmp))
nsrv = serverlib.Server(tmp, "prompts-noclose", nc, ["-c", str(N_CTX)])
check(len(serverlib.token_ids(nc, "a" * 10)) == 10, "noclose: one token a character, no BOS")
cut = {"prompt": ["a" * (N_CTX - 2), "b", "c"], "max_tokens": 150, "logprobs": 0,
       "response_format": {"type": "json_object"}}
status, chunks, done, raw = nsrv.stream(COMPLETIONS, cut, timeout=600)
errs = [c["error"] for c in chunks if "error" in c]
answer = [c for c in chunks if "error" not in c]
mine = {i: [c["choices"][0] for c in answer if c["choices"][0]["index"] == i] for i in range(3)}
fin0 = [c["finish_reason"] for c in mine[0]]
check(status == 200 and done and fin0[-1:] == ["length"] and
      all(f is None for f in fin0[:-1]),
      "mid-answer failure: prompt 0 answered, its last chunk \"length\": %s %r"
      % (status, raw[:400]))
cut_text = "".join(c["text"] for c in mine[1])
cut_tokens = sum(len((c.get("logprobs") or {}).get("tokens", [])) for c in mine[1])
check("{" in cut_text and cut_tokens >= 2 and all(c["finish_reason"] is None for c in mine[1]),
      "mid-answer failure: prompt 1's text up to the dead end, with no finish_reason "
      "(cut): %r, %d tokens, %r" % (cut_text, cut_tokens, mine[1][-2:]))
check(len(errs) == 1 and "error" in chunks[-1] and not mine[2],
      "mid-answer failure: one error event, the last, and prompt 2 not run: %r"
      % raw[-600:])
msg = errs[0].get("message", "") if errs else ""
check(msg.startswith("prompt[1]: no token of the model's vocabulary can continue the JSON") and
      ("choice 1 was cut after %d tokens" % cut_tokens) in msg,
      "mid-answer failure: the error names prompt[1] and the %d tokens its choice had: %r"
      % (cut_tokens, msg))
# Not streamed: no partial answer, the whole request is the error.
status, _, d, raw = nsrv.post(COMPLETIONS, cut, timeout=600)
err = (d or {}).get("error") or {}
check(status == 400 and "choices" not in (d or {}) and
      err.get("message", "").startswith("prompt[1]: no token of the model's vocabulary") and
      "cut" not in err.get("message", ""),
      "mid-answer failure, not streamed: a 400 naming prompt[1], no choices: %s %r"
      % (status, raw[:400]))
# A prompt 0 that fails mid-answer: nothing of a later prompt, and the same
# rule (its chunks, no finish_reason, the error naming it).
status, chunks, done, raw = nsrv.stream(COMPLETIONS, dict(cut, prompt=["b", "c"]),
                                        timeout=600)
errs = [c["error"] for c in chunks if "error" in c]
idx = [c["choices"][0]["index"] for c in chunks if "error" not in c]
if status == 200:
    n0 = sum(len((c["choices"][0].get("logprobs") or {}).get("tokens", []))
             for c in chunks if "error" not in c)
    check(done and idx and set(idx) == {0} and len(errs) == 1 and
          ("choice 0 was cut after %d tokens" % n0) in errs[0].get("message", ""),
          "prompt 0 failing mid-answer: its chunks, then the error naming it: %r" % raw[-600:])
else:  # it failed before any of its text went out: a plain error
    err = (json.loads(raw) if raw.startswith(b"{") else {}).get("error") or {}
    check(status == 400 and err.get("message", "").startswith("prompt[0]: no token"),
          "prompt 0 failing before any text: a 400 naming prompt[0]: %s %r" % (status, raw[:300]))
check(nsrv.stop() == 0, "the noclose server stops cleanly: " + nsrv.stderr()[-2000:])

# --- a client that leaves -----------------------------------------------------
print("a client that leaves", flush=True)
body = json.dumps({"prompt": ["tell me %d" % i for i in range(64)], "max_tokens": 2000,
                   "logit_bias": {"2": -100}}).encode()
s = socket.create_connection(("127.0.0.1", srv.port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(3)  # well into the prompts (20 ms a token)
s.close()
t0 = time.time()
status, _, d, raw = srv.post(COMPLETIONS, {"prompt": "x", "max_tokens": 1}, timeout=600)
waited = time.time() - t0
# The 64 x 2000 tokens left at 20 ms each would be 40 minutes.
check(status == 200 and waited < 120,
      "the next request is answered once the client left: %s after %.1f s" % (status, waited))
status, hdrs, out = srv.request("GET", "/health")
try:
    health = json.loads(out)
except ValueError:
    health = {}
check(health.get("abandoned", 0) >= 1 or
      any(isinstance(v, dict) and v.get("abandoned", 0) >= 1 for v in health.values()),
      "the left request counts as abandoned: %r" % out[:300])

# --- the prompts counted: where each is encoded ------------------------------
print("the prompts counted", flush=True)
# The server's debug log (on its stdout) says each time a text prompt is
# encoded, to be counted or to be run. A larger context (4,400) lets each of 64 prompts fit
# and their total pass 262,144 tokens.
long_model = serverlib.make_model(tmp, name="llama2-long", vocab=vocab, arch="llama",
                                  extra=["--ctx", "4400"])
os.environ["G_MESSAGES_DEBUG"] = "tern-server"
csrv = serverlib.Server(tmp, "prompts-count", long_model, args=["-c", "4400"])
del os.environ["G_MESSAGES_DEBUG"]


def counted(body, stream=False):
    """Posts body to csrv: (status, error, prompts encoded for the bound,
    prompts encoded for their run)."""
    before = len(open(csrv.out_path).read())
    if stream:
        status, _, _, raw = csrv.stream(COMPLETIONS, body, timeout=600)
    else:
        status, _, _, raw = csrv.post(COMPLETIONS, body, timeout=600)
    try:
        err = json.loads(raw).get("error") or {} if status != 200 else {}
    except ValueError:
        err = {"raw": raw[:300]}
    log = open(csrv.out_path).read()[before:]
    return status, err, log.count("encoded for the prompts' bound"), log.count(
        "encoded for its run")


# Prompt 1 of 64 is 4,502 tokens (9,000 bytes: under the tokenizer's bound
# for 4,400): refused naming it, with the message its run would have given,
# once it and prompt 0 are encoded; the 62 after it were encoded too
# (seconds under ASan for 64 prompts of 15 KB), and prompt 0 was run.
over = ["x", "a " * 4500] + ["b " * 3000] * 62
for stream in (False, True):
    status, err, fit, run = counted({"prompt": over, "max_tokens": 1}, stream)
    check(status == 400 and err.get("param") == "prompt" and
          err.get("code") == "context_length_exceeded" and
          err.get("message", "").startswith(
              "prompt[1]: the message is 4502 tokens; the context holds 4400"),
          "prompt 1 over the context by its count (stream %s): 400 naming it: %s %r"
          % (stream, status, err))
    check((fit, run) == (2, 0), "prompt 1 over the context (stream %s): only prompts 0 and 1 "
          "encoded, none run: %d encoded for the bound, %d for a run" % (stream, fit, run))
# Token ids over the context: refused so too, before prompt 0 runs.
status, err, fit, run = counted({"prompt": [[5] * 10, [5] * 4401, [5]], "max_tokens": 1},
                                True)
check(status == 400 and err.get("message", "").startswith(
      "prompt[1]: the message is 4401 tokens; the context holds 4400"),
      "token ids over the context: 400 before any chunk, naming prompt[1]: %s %r"
      % (status, err))
# Prompts that fit: each encoded once, for the bound, and run from that.
status, err, fit, run = counted({"prompt": ["a b c", "d e f", "g"], "max_tokens": 1})
check(status == 200 and (fit, run) == (3, 0),
      "3 prompts that fit: each encoded once, for the bound: %s, %d and %d for a run %r"
      % (status, fit, run, err))
# 64 prompts that fit the context, 265,728 tokens together: the total's bound.
status, err, fit, run = counted({"prompt": ["a " * 4150] * 64, "max_tokens": 1})
check(status == 400 and err.get("param") == "prompt" and
      "one request may hold at most 262144" in err.get("message", "") and fit == 64 and
      run == 0, "64 prompts over the total's bound: 400 naming it, each encoded once: %s %r, "
      "%d and %d" % (status, err, fit, run))
check(csrv.stop() == 0, "the counting server stops cleanly: " + csrv.stderr()[-2000:])

# --- the server stopped during a prompt ---------------------------------------
print("the server stopped during a prompt", flush=True)
# Prompt 0 of 2 runs for 40 s (2,000 tokens, 20 ms each, the end of text all
# but banned): the server is stopped once its first chunk is read. Its
# choice was cut, not finished: no finish_reason, and the error says so.
c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
c.request("POST", COMPLETIONS, body=json.dumps({
    "prompt": ["tell me", "x"], "max_tokens": 2000, "logit_bias": {"2": -100},
    "stream": True}), headers={"Content-Type": "application/json"})
r = c.getresponse()
head = b""
while r.status == 200 and b'"index":0' not in head:
    line = r.readline()
    if not line:
        break
    head += line
rc = srv.stop()
out = head + r.read()
c.close()
events = serverlib.sse_events(out) if r.status == 200 else []
docs = [json.loads(e) for e in events if e != "[DONE]"]
fins = [d["choices"][0]["finish_reason"] for d in docs if d.get("choices")]
idx = {d["choices"][0]["index"] for d in docs if d.get("choices")}
errs = [d["error"] for d in docs if "error" in d]
check(rc == 0, "the server stops cleanly: " + srv.stderr()[-2000:])
check(r.status == 200 and events[-1:] == ["[DONE]"] and idx == {0} and fins and
      all(f is None for f in fins) and len(errs) == 1 and "error" in docs[-1] and
      errs[0].get("code") == "cancelled" and
      "choice 0 was cut after" in errs[0].get("message", ""),
      "stopped during prompt 0: its chunks with no finish_reason, then a cancelled error "
      "naming it: %s %r" % (r.status, out[-500:]))
checks.finish()
