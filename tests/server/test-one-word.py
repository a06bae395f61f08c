#!/usr/bin/env python3
"""The long one-word prompt (docs/TOKENIZER.md, "Refusing early: the bound"):
a prompt or a chat message of about a megabyte of one word (one letter,
random CJK, random emoji) on a 1,024-token context is refused 400
context_length_exceeded from the tokenizer's lower bound, before it is
encoded: the answer says "at least N tokens". Encoded first, it said how many
exactly, after seconds. With Qwen3's vocabulary the old bound (the length
over the longest token text, a run of spaces) was 1,024 for a megabyte and
let every one of these through to the encoder. Tiny random-weight models
with the real Qwen3 and Gemma 3 vocabularies."""

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("one-word")
rng = random.Random(7)
SIZE = 1000000  # under the server's 1 MiB body cap, JSON and all
words = [("one letter", "a" * SIZE),
         ("random CJK", "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(SIZE // 3))),
         ("random emoji", "".join(chr(rng.randint(0x1F600, 0x1F64F)) for _ in range(SIZE // 4)))]

for family, arch in [("qwen3", "qwen3"), ("gemma3", "gemma3")]:
    model = serverlib.make_model(tmp, name=family, vocab=serverlib.real_vocab(family), arch=arch)
    srv = serverlib.Server(tmp, "one-word-" + family, model, ["-c", "1024"])
    for label, text in words:
        for path, body, param in [
                ("/v1/completions", {"prompt": text}, "prompt"),
                ("/v1/chat/completions", {"messages": [{"role": "user", "content": text}]},
                 "messages")]:
            data = json.dumps(dict(body, max_tokens=1), ensure_ascii=False).encode()
            s, _, doc, out = srv.post(path, data)
            e = (doc or {}).get("error") or {}
            check(s == 400 and e.get("code") == "context_length_exceeded"
                  and e.get("param") == param and "at least" in e.get("message", ""),
                  "%s: %s of %s (%d bytes) in %s: 400 context_length_exceeded from the bound, "
                  "not encoded (got %s %r)" % (family, param, label, len(text.encode()), path, s,
                                               out[:300]))
    # What fits is still answered.
    s, _, doc, out = srv.post("/v1/completions", {"prompt": "a" * 200, "max_tokens": 1})
    check(s == 200,
          "%s: 200 bytes of one letter still answered (got %s %r)" % (family, s, out[:200]))
    rc = srv.stop()
    check(rc == 0, "%s: the server stopped cleanly (%s: %s)" % (family, rc, srv.stderr()[-500:]))
checks.finish()
