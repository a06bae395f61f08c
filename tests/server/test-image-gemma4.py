#!/usr/bin/env python3
"""Gemma 4 vision projectors through the OpenAI API (tern-cli serve, real
HTTP): a projector written by mkmodel --arch gemma4-vision beside a
random-weight model of its width (a Gemma 3 one: the test vocabularies have
no Gemma 4 one; the projector's budgets and the server's plumbing are what is
tested, the Gemma 4 prompt layout is in tests/engine and tools/compare):
  - tern.image_tokens picks the budget; the image's count follows its size
    (llama.cpp's plan: a 360 x 240 picture in 12-px tokens is 60 tokens at
    70, 260 at 280, 600 uncapped);
  - a single-turn request defaults to 70 (flash), a conversation to 1120;
  - the same image at the same budget reuses its encoding, at another budget
    it is encoded again;
  - a budget Gemma 4 does not take is a 400 naming the choices;
  - decoded pictures count against the server's budget of pixels held
    (TERN_SERVER_IMAGE_MEGAPIXELS): a request whose own pictures pass it is
    a 400 naming the megapixels, one meeting another request's pictures
    still waiting to be encoded a 503 images_busy, and what a request held
    is given back."""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
vocab = serverlib.real_vocab("gemma3")

tmp = serverlib.workdir("serve-image-gemma4")
model = serverlib.make_model(tmp, name="gemma", vocab=vocab, arch="gemma3")
projector = serverlib.make_projector(tmp, model, "gemma4-vision",
                                     ["--patch", "4", "--embd", "32", "--ff", "48", "--layers",
                                      "1", "--heads", "2", "--positions", "128"],
                                     "mmproj-gemma-g4.gguf")


def png(w, h, seed=0):
    return serverlib.png(w, h, lambda y: bytes((x * 7 + y * 3 + seed) % 256 for x in range(w * 3)))


photo = serverlib.data_uri(png(360, 240))


def ask(srv, budget=None, single_turn=None):
    parts = [{"type": "text", "text": "What is in this picture?"},
             {"type": "image_url", "image_url": {"url": photo}}]
    body = {"model": "gemma", "messages": [{"role": "user", "content": parts}], "max_tokens": 2}
    tern = {}
    if budget is not None:
        tern["image_tokens"] = budget
    if single_turn is not None:
        tern["single_turn"] = single_turn
    if tern:
        body["tern"] = tern
    return srv.post("/v1/chat/completions", body)


def timings(doc):
    return doc["usage"]["timings"] if doc and "usage" in doc else {}


srv = serverlib.Server(tmp, "vision-g4", model, ["-c", "2048"])
s1, _, d1, raw1 = ask(srv, budget=70)
checks.check(s1 == 200 and timings(d1).get("image_tokens") == 60,
             "budget 70: 60 image tokens (%s)" % raw1[:300])
s2, _, d2, raw2 = ask(srv, budget=280)
checks.check(s2 == 200 and timings(d2).get("image_tokens") == 260 and
             timings(d2).get("images_reused") == 0,
             "budget 280: 260 image tokens, encoded anew (%s)" % raw2[:300])
if s1 == 200 and s2 == 200:
    checks.check(d2["usage"]["prompt_tokens"] - d1["usage"]["prompt_tokens"] == 200,
                 "the prompt grows by exactly 200 tokens (%d vs %d)"
                 % (d1["usage"]["prompt_tokens"], d2["usage"]["prompt_tokens"]))
s3, _, d3, raw3 = ask(srv, budget=280)
checks.check(s3 == 200 and timings(d3).get("images_reused") == 1 and
             timings(d3).get("image_encode_ms") == 0 and timings(d3).get("image_tokens") == 260,
             "the same image at the same budget reuses its encoding (%s)" % timings(d3))
s4, _, d4, raw4 = ask(srv)
checks.check(s4 == 200 and timings(d4).get("image_tokens") == 60 and
             timings(d4).get("images_reused") == 1,
             "a single-turn request defaults to 70 (the cached encoding) (%s)" % raw4[:300])
s5, _, d5, raw5 = ask(srv, single_turn=False)
checks.check(s5 == 200 and timings(d5).get("image_tokens") == 600,
             "a conversation defaults to 1120: 600 tokens (%s)" % raw5[:300])
s6, _, d6, raw6 = ask(srv, budget=100)
e = (d6 or {}).get("error") or {}
checks.check(s6 == 400 and e.get("param") == "tern" and
             "70, 140, 280, 560 or 1120" in (e.get("message") or ""),
             "budget 100 is refused with the choices (%s: %s)" % (s6, raw6[:300]))
checks.check(srv.stop() == 0, "the server stops cleanly")

# A budget of 1 Mi pixels: two 800 x 800 pictures (0.64 Mpx each, whole for
# Gemma 4) do not fit together, one does, again and again once given back.
# Each picture is new (seeded), so that none comes from the encoding cache.
os.environ["TERN_SERVER_IMAGE_MEGAPIXELS"] = "1"
# Each answer's tokens come 200 ms apart, so that a request can wait.
small = serverlib.Server(tmp, "vision-g4-budget", model, ["-c", "2048", "--debug-token-delay", "200"])
del os.environ["TERN_SERVER_IMAGE_MEGAPIXELS"]


def pictures_body(seeds):
    parts = [{"type": "text", "text": "Compare these."}]
    for sd in seeds:
        url = serverlib.data_uri(png(800, 800, sd))
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"model": "gemma", "messages": [{"role": "user", "content": parts}], "max_tokens": 1,
            "tern": {"image_tokens": 70}}


def ask_pictures(srv, seeds):
    return srv.post("/v1/chat/completions", pictures_body(seeds))


s7, _, d7, raw7 = ask_pictures(small, [1, 2])
e7 = (d7 or {}).get("error") or {}
checks.check(s7 == 400 and e7.get("code") == "image_too_large" and
             "1.3 megapixels" in (e7.get("message") or "") and
             "1.0" in (e7.get("message") or ""),
             "two 800 x 800 pictures pass a 1 Mi pixel budget: 400 (%s: %s)" % (s7, raw7[:300]))
for sd in (3, 4, 5):
    s8, _, d8, raw8 = ask_pictures(small, [sd])
    checks.check(s8 == 200 and timings(d8).get("images_reused") == 0,
                 "one new 800 x 800 picture fits, its pixels given back after (%s: %s)"
                 % (s8, raw8[:300]))

# A streamed answer of 2,000 tokens (200 ms each) holds the engine until
# its client leaves; a request with one picture comes in behind it, its
# picture decoded and held until the engine encodes it (/health's
# image_pixels says when); a third with one picture of its own meets those
# pixels: 503 images_busy (it would fit alone). Each step waits for the
# state the next one needs, not for a time: the third is sent once the
# pixels are held, and the engine stays busy until the test lets it go.
# Then the queued picture is answered, and the refused one passes.
results = {}


def send(name, body):
    try:
        results[name] = small.post("/v1/chat/completions", body)
    except Exception as err:  # noqa: BLE001 - a dropped connection is a result too
        results[name] = (None, None, None, repr(err).encode())


abandoned0 = small.health()["abandoned"]
# Its every token a visible "a" (this random model's own answer is new
# lines, which the stream holds back): each is written at once, so the
# server sees the client leave at the next one.
a_token = serverlib.token_ids(model, "a")[-1]
story = json.dumps({"model": "gemma", "max_tokens": 2000, "stream": True,
                    "logit_bias": {str(a_token): 100},
                    "messages": [{"role": "user", "content": "Tell me a long story."}]}).encode()
holder = socket.create_connection(("127.0.0.1", small.port), timeout=120)
holder.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
               b"application/json\r\nContent-Length: %d\r\n\r\n" % len(story) + story)
got = b""
while b'{"content":"a' not in got:  # its first text: the engine runs it
    b = holder.recv(4096)
    if not b:
        break
    got += b
checks.check(got.startswith(b"HTTP/1.1 200") and b'{"content":"a' in got,
             "the long answer streams: %r" % got[:600])
queued = threading.Thread(target=send, args=("queued", pictures_body([6])))
queued.start()
small.wait_health(checks, "the queued request's picture is decoded and held", lambda h: h["image_pixels"] > 0)
s9, _, d9, raw9 = ask_pictures(small, [7])
e9 = (d9 or {}).get("error") or {}
checks.check(s9 == 503 and e9.get("code") == "images_busy" and
             "retry later" in (e9.get("message") or ""),
             "a picture meeting a queued request's picture: 503 images_busy (%s: %s)"
             % (s9, raw9[:300]))
h = small.health()
checks.check(h["queue"] == 2 and h["image_pixels"] > 0,
             "the long answer still runs and the queued picture still waits: %r" % h)
holder.close()
queued.join()  # its post gives up after 120 s without an answer
checks.check(results.get("queued", (None,))[0] == 200,
             "the queued picture is answered once the engine is free (%s)"
             % results.get("queued", (None, None, None, b"none"))[3][:200])
small.wait_health(checks, "the long answer's client that left counts as abandoned, its pixels none",
         lambda h: h["abandoned"] == abandoned0 + 1 and h["image_pixels"] == 0)
s10, _, d10, raw10 = ask_pictures(small, [7])
checks.check(s10 == 200, "the refused picture passes once the others are done (%s: %s)"
             % (s10, raw10[:300]))
checks.check(small.stop() == 0, "the server with the small budget stops cleanly")
checks.finish()
