#!/usr/bin/env python3
"""logprobs and top_logprobs (docs/SERVER.md, "Log-probabilities").

- Chat: "logprobs": true with "top_logprobs" N gives choices[0].logprobs.content,
  one entry per token of the answer ({token, logprob, bytes, top_logprobs}),
  streamed (each chunk its tokens) and not, the same numbers both ways and on
  the single-turn and conversation paths; greedy, each token is its row's
  best; the numbers are the model's (a logit_bias or a temperature leaves
  the first row's alternatives as they were); with prompt-lookup speculation
  accepting drafts they are the same, bit for bit, as without.
- A stop string: the entries end with the last token whose text is kept.
- A token that is part of a UTF-8 character: "bytes" has its byte, "token"
  OpenAI's "bytes:\\xNN".
- Tools: a call's marker that turns out to be no call brings its entries,
  streamed and not.
- Completions: "logprobs": N gives tokens, token_logprobs, top_logprobs
  (dicts of N) and text_offset (echo with logprobs: test-echo.py).
- Refusals: 400s naming logprobs or top_logprobs.

A tiny random-weight Qwen3-architecture model with the real Qwen3 vocabulary."""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("logprobs")
vocab = serverlib.real_vocab("qwen3")
model = serverlib.make_model(tmp, name="qwen3", vocab=vocab, arch="qwen3")
srv = serverlib.Server(tmp, "logprobs", model)

MESSAGES = [{"role": "user", "content": "Write something."}]


def chat(stream=False, **extra):
    """(status, content, logprobs.content entries or None, raw)"""
    body = {"messages": MESSAGES, "max_tokens": 12, "stream": stream}
    body.update(extra)
    status, _, doc, raw = srv.post("/v1/chat/completions", body)
    if status != 200:
        return status, None, None, raw
    if not stream:
        ch = doc["choices"][0]
        lp = ch["logprobs"]
        return status, ch["message"]["content"], (lp["content"] if lp else None), raw
    text, entries, any_lp = "", [], False
    for e in serverlib.sse_events(raw):
        if e == "[DONE]":
            continue
        ch = json.loads(e)["choices"]
        if not ch:
            continue
        text += ch[0]["delta"].get("content") or ""
        if ch[0].get("logprobs") is not None:
            any_lp = True
            entries += ch[0]["logprobs"]["content"]
    return status, text, (entries if any_lp else None), raw


def entry_ok(e, n_top):
    return (isinstance(e.get("token"), str) and isinstance(e.get("logprob"), float) and
            e["logprob"] <= 0 and isinstance(e.get("bytes"), list) and
            all(isinstance(b, int) and 0 <= b < 256 for b in e["bytes"]) and
            len(e.get("top_logprobs", [])) == n_top)


# --- chat, not streamed -----------------------------------------------------------
status, _, lp, raw = chat()
check(status == 200 and lp is None, "no logprobs asked: null (%s %r)" % (status, raw[:200]))
status, _, lp, raw = chat(logprobs=False)
check(status == 200 and lp is None, "logprobs false: null (%s %r)" % (status, raw[:200]))

status, content, lp, raw = chat(logprobs=True, top_logprobs=5)
check(status == 200 and lp and len(lp) == 12, "12 entries (%s): %r" % (status, raw[:400]))
lp = lp or []
for i, e in enumerate(lp):
    check(entry_ok(e, 5), "entry %d well formed: %r" % (i, e))
    tops = e["top_logprobs"]
    check(all(tops[k]["logprob"] >= tops[k + 1]["logprob"] for k in range(len(tops) - 1)),
          "entry %d: top sorted: %r" % (i, tops))
    # greedy: the token taken is the row's most likely, with its number
    check(tops and tops[0]["token"] == e["token"] and tops[0]["logprob"] == e["logprob"],
          "entry %d: greedy token is top 1: %r" % (i, e))
    check(sum(math.exp(t["logprob"]) for t in tops) <= 1 + 1e-6, "entry %d: mass <= 1" % i)
    check(bytes(e["bytes"]).decode("utf-8", "replace") == e["token"] or
          e["token"].startswith("bytes:"), "entry %d: token is its bytes: %r" % (i, e))
joined = b"".join(bytes(e["bytes"]) for e in lp).decode("utf-8", "replace")
check(joined == content, "the entries spell the content: %r vs %r" % (joined, content))

status, _, lp0, raw = chat(logprobs=True)
check(status == 200 and lp0 and all(e["top_logprobs"] == [] for e in lp0) and
      [e["logprob"] for e in lp0] == [e["logprob"] for e in lp],
      "top_logprobs absent: [] alternatives, the same numbers: %r" % raw[:300])

# --- streamed: each chunk carries its tokens; the same numbers -----------------
status, s_content, s_lp, raw = chat(stream=True, logprobs=True, top_logprobs=5)
check(status == 200 and s_content == content and s_lp == lp,
      "streamed == not streamed (%s): %r" % (status, raw[:400]))
events = [json.loads(e) for e in serverlib.sse_events(raw) if e != "[DONE]"]
for ev in events:
    for ch in ev["choices"]:
        text = ch["delta"].get("content") or ""
        carried = ch.get("logprobs")
        if ch.get("finish_reason") or "role" in ch["delta"]:
            check(carried is None, "role and finish chunks carry no logprobs: %r" % ev)
        elif carried:
            got = b"".join(bytes(e["bytes"]) for e in carried["content"]).decode("utf-8",
                                                                                 "replace")
            check(got == text, "a chunk's entries are its text: %r vs %r" % (got, text))

# --- the conversation path gives the same numbers ----------------------------
status, c_content, c_lp, raw = chat(logprobs=True, top_logprobs=5,
                                    tern={"single_turn": False})
check(status == 200 and c_content == content and c_lp == lp,
      "conversation == single turn (%s): %r" % (status, raw[:300]))

# --- the model's numbers: a bias or a temperature does not change them -----
first = lp[0] if lp else {"token": "", "top_logprobs": []}
best = serverlib.token_ids(model, first["token"])
status, _, b_lp, raw = chat(logprobs=True, top_logprobs=5, max_tokens=1,
                            logit_bias={str(best[0]): -100} if len(best) == 1 else {})
check(len(best) == 1 and status == 200 and b_lp and
      b_lp[0]["top_logprobs"] == first["top_logprobs"] and b_lp[0]["token"] != first["token"],
      "banned first token: the same alternatives, another token: %r" % raw[:400])
if b_lp:
    alt = {t["token"]: t["logprob"] for t in first["top_logprobs"]}
    if b_lp[0]["token"] in alt:
        check(b_lp[0]["logprob"] == alt[b_lp[0]["token"]],
              "the biased pick's logprob is the model's: %r" % b_lp[0])
status, _, t_lp, raw = chat(logprobs=True, top_logprobs=5, max_tokens=1, temperature=1.5,
                            seed=7)
check(status == 200 and t_lp and t_lp[0]["top_logprobs"] == first["top_logprobs"],
      "temperature 1.5: the same alternatives: %r" % raw[:400])

# --- speculation: accepted drafts' numbers are plain decoding's ------------
rep = [{"role": "user", "content": "one two three four five " * 12 + "x" + " x" * 40}]
x_id = serverlib.token_ids(model, " x")
outs, accepted = [], 0
for spec in [False, "lookup"]:
    status, _, doc, raw = srv.post("/v1/chat/completions", {
        "messages": rep, "max_tokens": 40, "logit_bias": {str(x_id[0]): 100}, "logprobs": True,
        "top_logprobs": 3, "tern": {"speculation": spec}})
    check(status == 200, "speculation %s: %d %r" % (spec, status, raw[:200]))
    outs.append(doc["choices"][0]["logprobs"] if status == 200 else None)
    if spec and status == 200:
        accepted += doc["usage"].get("timings", {}).get("accepted_tokens", 0)
check(outs[0] is not None and outs[0] == outs[1],
      "speculation on == off, exactly: %r vs %r" % (str(outs[0])[:300], str(outs[1])[:300]))
check(accepted > 0, "prompt lookup had drafts accepted (%d)" % accepted)

# --- a stop string: the entries end with the last token kept ----------------
if len(content) > 6:
    stop = content[len(content) // 2:len(content) // 2 + 3]
    status, st_content, st_lp, raw = chat(logprobs=True, stop=[stop])
    kept = content[:content.index(stop)]
    check(status == 200 and st_content == kept, "stop string: %r vs %r" % (st_content, kept))
    st_lp = st_lp or []
    spelled = b"".join(bytes(e["bytes"]) for e in st_lp).decode("utf-8", "replace")
    before_last = b"".join(bytes(e["bytes"]) for e in st_lp[:-1]).decode("utf-8", "replace")
    check(spelled.startswith(kept) and (not st_lp or len(before_last) < len(kept)),
          "stop: entries cover the kept text and no more tokens: %r / %r" % (spelled, kept))
    status, ss_content, ss_lp, raw = chat(stream=True, logprobs=True, stop=[stop])
    check(status == 200 and ss_content == kept and ss_lp == st_lp,
          "stop, streamed: the same entries: %r" % raw[-600:])

# --- a token that is a piece of a character ------------------------------
with open(vocab) as f:
    vocab_map = json.load(f)["model"]["vocab"]
byte_e6 = vocab_map.get("\u00e6")  # byte-level BPE: "æ" is the byte 0xe6
status, _, p_lp, raw = chat(logprobs=True, top_logprobs=2, max_tokens=1,
                            logit_bias={str(byte_e6): 100})
check(status == 200 and p_lp and p_lp[0]["bytes"] == [0xe6] and
      p_lp[0]["token"] == "bytes:\\xe6" and p_lp[0]["logprob"] < 0,
      "a partial character: bytes [230], token 'bytes:\\xe6': %r" % raw[:400])

# --- tools: text held for a call that is none still brings its entries -----
with open(vocab) as f:
    added = {t["content"]: t["id"] for t in json.load(f).get("added_tokens", [])}
call_id = added.get("<tool_call>")
tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
t_out = []
for stream in [False, True]:
    status, t_content, t_lp, raw = chat(stream=stream, logprobs=True, top_logprobs=1, max_tokens=3,
                                        tools=tools, logit_bias={str(call_id): 100})
    t_out.append(t_lp)
    check(status == 200 and t_lp and len(t_lp) == 3 and t_lp[0]["token"] == "<tool_call>",
          "tools, stream %s: 3 entries, the marker first: %r" % (stream, raw[-600:]))
check(t_out[0] == t_out[1], "tools: streamed == not: %r vs %r" % (t_out[0], t_out[1]))

# --- completions --------------------------------------------------------------
PROMPT = "Once upon a time"


def complete(stream=False, **extra):
    body = {"prompt": PROMPT, "max_tokens": 10, "stream": stream}
    body.update(extra)
    status, _, doc, raw = srv.post("/v1/completions", body)
    if status != 200:
        return status, None, None, raw
    if not stream:
        return status, doc["choices"][0]["text"], doc["choices"][0]["logprobs"], raw
    text, lp = "", None
    for e in serverlib.sse_events(raw):
        if e == "[DONE]":
            continue
        ch = json.loads(e)["choices"]
        if not ch:
            continue
        text += ch[0]["text"]
        if ch[0].get("logprobs"):
            lp = lp or {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                        "text_offset": []}
            for k in lp:
                lp[k] += ch[0]["logprobs"][k]
    return status, text, lp, raw


status, text, clp, raw = complete()
check(status == 200 and clp is None, "completions without logprobs: null: %r" % raw[:200])
status, text, clp, raw = complete(logprobs=3)
check(status == 200 and clp and len(clp["tokens"]) == 10 and
      len(clp["token_logprobs"]) == 10 and len(clp["top_logprobs"]) == 10 and
      len(clp["text_offset"]) == 10, "completions: 10 of each: %r" % raw[:400])


def token_bytes(t):
    """A token's bytes from its text, or from OpenAI's "bytes:\\xNN..." form."""
    if t.startswith("bytes:"):
        return bytes(int(h, 16) for h in t[len("bytes:"):].split("\\x")[1:])
    return t.encode()


if status == 200 and clp:
    spelled = [token_bytes(t) for t in clp["tokens"]]
    check(b"".join(spelled).decode("utf-8", "replace") == text,
          "tokens spell the text: %r vs %r" % (clp["tokens"], text))
    # where each token starts, in characters (a piece of a character
    # counts where the character starts)
    want = [len(b"".join(spelled[:i]).decode("utf-8", "replace")) for i in range(10)]
    check(clp["text_offset"] == want, "text_offset: %r, want %r" % (clp["text_offset"], want))
    check(all(len(d) <= 3 and all(v <= 0 for v in d.values()) for d in clp["top_logprobs"]),
          "top_logprobs: dicts of 3: %r" % clp["top_logprobs"][:2])
    check(all(clp["top_logprobs"][i].get(clp["tokens"][i]) == clp["token_logprobs"][i]
              for i in range(10)), "greedy: each token is in its dict with its logprob")
    status, s_text, s_clp, raw = complete(stream=True, logprobs=3)
    check(status == 200 and s_text == text and s_clp == clp,
          "completions streamed == not: %r" % raw[:400])

# --- refusals -------------------------------------------------------------------
refusals = [
    ("chat", {"logprobs": "yes"}, "logprobs"),
    ("chat", {"logprobs": 1}, "logprobs"),
    ("chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("chat", {"logprobs": True, "top_logprobs": 1.5}, "top_logprobs"),
    ("chat", {"logprobs": True, "top_logprobs": "3"}, "top_logprobs"),
    ("chat", {"top_logprobs": 2}, "top_logprobs"),
    ("chat", {"logprobs": False, "top_logprobs": 2}, "top_logprobs"),
    ("completions", {"logprobs": 6}, "logprobs"),
    ("completions", {"logprobs": -1}, "logprobs"),
    ("completions", {"logprobs": True}, "logprobs"),
    ("completions", {"logprobs": 2.5}, "logprobs"),
    ("completions", {"logprobs": "2"}, "logprobs"),
]
for kind, extra, param in refusals:
    if kind == "chat":
        body = {"messages": MESSAGES, "max_tokens": 2}
        path = "/v1/chat/completions"
    else:
        body = {"prompt": PROMPT, "max_tokens": 2}
        path = "/v1/completions"
    body.update(extra)
    status, _, doc, raw = srv.post(path, body)
    err = (doc or {}).get("error") or {}
    check(status == 400 and err.get("param") == param and param in err.get("message", ""),
          "%s %r: 400 naming %s: %s %r" % (kind, extra, param, status, raw[:300]))

check(srv.stop() == 0, "the server stops cleanly: " + srv.stderr()[-2000:])

# --- text_offset with a SentencePiece vocabulary ------------------------------------
# A Llama 2 answer continues its prompt: its first token keeps its leading
# space (" nob" after "Hello\n" shows as " nob"), as llama.cpp's server gives
# it (docs/TOKENIZER.md, "The leading space"), so every token's text is at
# its offset, whole, the first one's too.
spm_model = serverlib.make_model(tmp, name="llama2", vocab=serverlib.real_vocab("llama2"))
spm = serverlib.Server(tmp, "logprobs-spm", spm_model)


def offsets_fit(text, lp, start):
    """Each token's text found whole at its offset, the last ending the
    text."""
    toks, off = lp["tokens"], lp["text_offset"]
    if off[0] != start:
        return False
    for i, t in enumerate(toks):
        if t.startswith("bytes:"):
            continue
        end = off[i + 1] if i + 1 < len(toks) else len(text)
        got = text[off[i]:end]
        if got != t:
            return False
    return True


space_first = 0
for prompt in ("Hello\n", "Once upon a time", "1, 2, 3,", "The capital of France is"):
    for stream in (False, True):
        for echo in (False,):
            body = {"prompt": prompt, "max_tokens": 6, "logprobs": 1, "temperature": 0,
                    "echo": echo, "stream": stream}
            status, _, doc, raw = spm.post("/v1/completions", body)
            if status != 200:
                check(False, "llama2 %r: %s %r" % (body, status, raw[:300]))
                continue
            if stream:
                text, lp = "", {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                                "text_offset": []}
                for e in serverlib.sse_events(raw):
                    ch = [] if e == "[DONE]" else json.loads(e)["choices"]
                    if ch:
                        text += ch[0]["text"]
                        for k in lp:
                            lp[k] += (ch[0].get("logprobs") or {}).get(k, [])
            else:
                text, lp = doc["choices"][0]["text"], doc["choices"][0]["logprobs"]
            start = len(prompt) if echo else 0
            first = lp["tokens"][0]
            space_first += first.startswith(" ") and text[start:start + len(first)] == first
            if not echo and not any(t.startswith("bytes:") for t in lp["tokens"]):
                check(text == "".join(lp["tokens"]),
                      "llama2 %r stream %s: the text is its tokens, whole: %r vs %r"
                      % (prompt, stream, text, lp["tokens"]))
            check(offsets_fit(text, lp, start),
                  "llama2 %r stream %s echo %s: text_offset %r fits %r (tokens %r)"
                  % (prompt, stream, echo, lp["text_offset"], text, lp["tokens"]))
check(space_first > 0, "some answer's first token kept its leading space (%d)" % space_first)
# A chat answer continues its template's text the same way.
for stream in (False, True):
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6,
            "logprobs": True, "temperature": 0, "stream": stream}
    status, _, doc, raw = spm.post("/v1/chat/completions", body)
    if status != 200:
        check(False, "llama2 chat stream %s: %s %r" % (stream, status, raw[:300]))
        continue
    if stream:
        content, toks = "", []
        for e in serverlib.sse_events(raw):
            ch = [] if e == "[DONE]" else json.loads(e)["choices"]
            if ch:
                content += ch[0]["delta"].get("content") or ""
                toks += [t["token"] for t in ((ch[0].get("logprobs") or {}).get("content") or [])]
    else:
        content = doc["choices"][0]["message"]["content"]
        toks = [t["token"] for t in doc["choices"][0]["logprobs"]["content"]]
    if not any(t.startswith("bytes:") for t in toks):
        check(content == "".join(toks), "llama2 chat stream %s: the content is its tokens, "
              "whole: %r vs %r" % (stream, content, toks))
# A control token that does not end the answer (BOS, forced by logit_bias)
# is no text: the offsets after it do not move (the engine reports its text
# as left out; they moved 3 characters per "<s>" before).
for stream in (False, True):
    body = {"prompt": "Hello\n", "max_tokens": 3, "logprobs": 1, "temperature": 0,
            "logit_bias": {"1": 100}, "stream": stream}
    status, _, doc, raw = spm.post("/v1/completions", body)
    if status != 200:
        check(False, "llama2 BOS stream %s: %s %r" % (stream, status, raw[:300]))
        continue
    if stream:
        text, toks, off = "", [], []
        for e in serverlib.sse_events(raw):
            ch = [] if e == "[DONE]" else json.loads(e)["choices"]
            if ch:
                text += ch[0]["text"]
                toks += (ch[0].get("logprobs") or {}).get("tokens", [])
                off += (ch[0].get("logprobs") or {}).get("text_offset", [])
    else:
        text, toks = doc["choices"][0]["text"], doc["choices"][0]["logprobs"]["tokens"]
        off = doc["choices"][0]["logprobs"]["text_offset"]
    check(text == "" and toks == ["<s>"] * 3 and off == [0, 0, 0],
          "llama2 BOS stream %s: text %r, tokens %r, text_offset %r" % (stream, text, toks, off))
check(spm.stop() == 0, "the llama2 server stops cleanly: " + spm.stderr()[-2000:])
checks.finish()
