#!/usr/bin/env python3
"""Echo's text_offset with a Llama 2 (SentencePiece) vocabulary
(docs/SERVER.md, "Scoring a prompt").

- text_offset of an echoed prompt: each offset is where that token's text
  starts in the echoed text (a BOS the tokenizer added and the "▁" it put in
  front of a text hold none of it), and the characters the tokens add reach
  the text's length; string prompts with control tokens written in them, a
  leading space, new lines, characters spelled as bytes; prompts as ids.

A tiny random-weight model with the real Llama 2 vocabulary."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("prompts")
vocab = serverlib.real_vocab("llama2")
model = serverlib.make_model(tmp, name="llama2", vocab=vocab, arch="llama")
srv = serverlib.Server(tmp, "prompts", model)


def post(body):
    status, _, doc, raw = srv.post("/v1/completions", body, timeout=600)
    return status, doc, raw


def token_bytes(t):
    """A completions "tokens" entry as bytes ("bytes:\\xe6" spells a piece
    of a character)."""
    if t.startswith("bytes:"):
        return bytes(int(h, 16) for h in t[6:].split("\\x")[1:])
    return t.encode()


CONTROL = ("<s>", "</s>", "<unk>")


def want_offsets(text, tokens, text_prompt):
    """Each token's offset (in characters) where its text starts in text,
    found by walking text with the tokens: a text prompt's first token is
    the BOS the tokenizer added, which holds none of it; SentencePiece put a
    "▁" in front of the text (and, in a text prompt, again after every
    control token in it), which the text does not hold: the next token that
    starts with a space has it; a control token is in a text prompt as
    written, and left out of an id prompt's echo. Also where the walk ended
    (bytes) and whether every token was found."""
    tb = text.encode()
    at, offs, placed, prefix = 0, [], True, True
    for i, t in enumerate(tokens):
        p = token_bytes(t)
        # characters before `at`: the bytes that start one
        offs.append(sum(1 for x in tb[:at] if x & 0xC0 != 0x80))
        if i == 0 and text_prompt:
            check(t == "<s>", "a text prompt's first token is the BOS added: %r" % t)
        elif t in CONTROL and not text_prompt:
            pass
        elif prefix and p.startswith(b" ") and tb.startswith(p[1:], at):
            at += len(p) - 1
            prefix = False
        elif tb.startswith(p, at):
            at += len(p)
            prefix = t in CONTROL
        else:
            placed = False
    return offs, at, placed


def echo_offsets(prompt, what):
    status, doc, raw = post({"prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 0})
    if not check(status == 200, "%s: echo answered: %s %r" % (what, status, raw[:300])):
        return
    ch = doc["choices"][0]
    text, lp = ch["text"], ch["logprobs"]
    if isinstance(prompt, str):
        check(text == prompt, "%s: the echo is the prompt: %r" % (what, text))
    offs, end, placed = want_offsets(text, lp["tokens"], isinstance(prompt, str))
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

check(srv.stop() == 0, "the server stops cleanly: " + srv.stderr()[-2000:])
checks.finish()
