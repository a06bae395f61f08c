#!/usr/bin/env python3
"""Images through the OpenAI API (tern-cli serve, real HTTP on 127.0.0.1): a
random-weight Gemma 3 model (real vocabulary) with a projector written for
it by mkmodel beside it, PNGs written here with zlib:
  - an image_url part with a PNG data: URI is answered; the same request
    answers the same; streamed, it answers the same text;
  - the budget (tern.image_tokens) gives exactly its tokens: prompt_tokens
    moves by exactly the difference, usage.timings.image_tokens says it;
  - a conversation with an image reuses its rows in the next turn;
  - errors in the OpenAI shape: remote URL, not an image, truncated PNG, a
    decompression bomb, images over the free context (with the counts), an
    image in a system message, a marker written in the text, a bad budget,
    a model served without a projector; a streamed request with a bad image
    gets a plain 400 before any event;
  - a projector given for a model that takes no images, or a missing one,
    is refused at start; two beside the model leave images off with a note."""

import base64
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
vocab = serverlib.real_vocab("gemma3")

tmp = serverlib.workdir("serve-image")
model = serverlib.make_model(tmp, name="gemma", vocab=vocab, arch="gemma3")
# 128 px in 2-px patches: Gemma 3's 64 x 64 patch grid (256 tokens) on a tiny tower.
projector = serverlib.make_projector(tmp, model, "gemma3-vision",
                                     ["--image-size", "128", "--patch", "2", "--embd", "32",
                                      "--ff", "64", "--layers", "1", "--heads", "2"],
                                     "mmproj-gemma-f32.gguf")


def png(w, h, declared=None, seed=0, noisy=False):
    if noisy:  # incompressible: cut in half, rows are missing
        rng = random.Random(seed)
        return serverlib.png(w, h, lambda y: bytes(rng.randrange(256) for _ in range(w * 3)),
                             declared)
    return serverlib.png(w, h, lambda y: bytes((x * 7 + y * 3 + seed) % 256 for x in range(w * 3)),
                         declared)


data_uri = serverlib.data_uri


photo = data_uri(png(60, 40))
other = data_uri(png(60, 40, seed=101))


def ask(srv, parts, budget=None, stream=False, system=None, extra=None, max_tokens=6):
    msgs = [{"role": "system", "content": system}] if system else []
    msgs.append({"role": "user", "content": parts})
    body = {"model": "gemma", "messages": msgs, "max_tokens": max_tokens}
    if budget is not None:
        body["tern"] = {"image_tokens": budget}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(extra or {})
    return srv.post("/v1/chat/completions", body)


def image_part(url, detail=None):
    p = {"type": "image_url", "image_url": {"url": url}}
    if detail:
        p["image_url"]["detail"] = detail
    return p


def text_part(t):
    return {"type": "text", "text": t}


def timings(doc):
    return doc["usage"]["timings"] if doc and "usage" in doc else {}


def is_error(doc, code=None, word=None):
    e = (doc or {}).get("error") or {}
    return (isinstance(e.get("message"), str) and e.get("type") == "invalid_request_error"
            and "param" in e and (code is None or e.get("code") == code)
            and (word is None or word in e["message"]))


# A context of 300: one native image (256 tokens) fits, two do not.
srv = serverlib.Server(tmp, "vision", model, ["-c", "300"])
out = open(srv.out_path).read()
checks.check("images: on, 256 tokens" in out, "the server says images are on: %r" % out)
checks.check("mmproj-gemma-f32.gguf" in srv.stderr(),
             "the projector beside the model is found: %r" % srv.stderr())

question = [text_part("What is in this picture?"), image_part(photo, detail="low")]
s1, _, d1, raw1 = ask(srv, question)
checks.check(s1 == 200, "an image request answers 200 (%s: %s)" % (s1, raw1[:300]))
t1 = timings(d1)
checks.check(t1.get("image_tokens") == 256, "native budget: 256 image tokens (%s)" % t1)
checks.check(t1.get("image_encode_ms", 0) > 0 and t1.get("image_decode_ms", 0) > 0,
             "decode and encode times are given (%s)" % t1)
if s1 == 200:
    u = d1["usage"]
    checks.check(u["prompt_tokens"] > 256 and u["completion_tokens"] > 0 and
                 u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"],
                 "usage counts the image in the prompt (%s)" % u)

s2, _, d2, raw2 = ask(srv, question)
checks.check(s2 == 200 and d1 and d2 and serverlib.answer_text(d1) == serverlib.answer_text(d2)
             and d1["usage"]["prompt_tokens"] == d2["usage"]["prompt_tokens"],
             "the same image request answers the same (%r / %r)" % (raw1[:200], raw2[:200]))
checks.check(t1.get("images_reused") == 0 and timings(d2).get("images_reused") == 1 and
             timings(d2).get("image_encode_ms") == 0 and timings(d2).get("image_tokens") == 256,
             "the second time the encoding is reused (%s / %s)" % (t1, timings(d2)))

# The budget: 16 tokens (a 4 x 4 grid), 20 -> also 16 (the largest square within).
s3, _, d3, raw3 = ask(srv, question, budget=16)
s4, _, d4, raw4 = ask(srv, question, budget=20)
checks.check(s3 == 200 and timings(d3).get("image_tokens") == 16,
             "tern.image_tokens 16: 16 image tokens (%s)" % raw3[:300])
checks.check(s4 == 200 and timings(d4).get("image_tokens") == 16,
             "tern.image_tokens 20: 16 image tokens (%s)" % raw4[:300])
if s1 == 200 and s3 == 200:
    checks.check(d1["usage"]["prompt_tokens"] - d3["usage"]["prompt_tokens"] == 256 - 16,
                 "the prompt is exactly 240 tokens shorter at 16 (%d vs %d)"
                 % (d1["usage"]["prompt_tokens"], d3["usage"]["prompt_tokens"]))
# A different picture gives other embeddings (the answer may still agree on
# random weights, the prompt size must).
s5, _, d5, raw5 = ask(srv, [text_part("What is in this picture?"), image_part(other)], budget=16)
checks.check(s5 == 200 and d5["usage"]["prompt_tokens"] == d3["usage"]["prompt_tokens"],
             "another picture at the same budget costs the same (%s)" % raw5[:300])

# Streamed: SSE framing, the same text as the plain answer, usage at the end.
s6, _, _, raw6 = ask(srv, question, budget=16, stream=True)
events = []
try:
    events = serverlib.sse_events(raw6)
except ValueError as err:
    checks.check(False, "stream framing: %s" % err)
checks.check(s6 == 200 and events and events[-1] == "[DONE]", "the stream ends with [DONE]")
if s6 == 200 and s3 == 200 and events:
    import json
    docs = [json.loads(e) for e in events[:-1]]
    text = "".join(c["delta"].get("content") or "" for d in docs for c in d["choices"])
    checks.check(text == serverlib.answer_text(d3), "streamed text equals the plain answer "
                 "(%r / %r)" % (text, serverlib.answer_text(d3)))
    checks.check(docs[-1]["usage"]["timings"]["image_tokens"] == 16, "the stream's usage says 16")

# Single turn against a pinned system prompt: the pin is restored, not
# re-prefilled, and the answer does not change.
sys_prompt = "You describe pictures in one word."
s10, _, d10, raw10 = ask(srv, question, budget=16, system=sys_prompt)
s11, _, d11, raw11 = ask(srv, question, budget=16, system=sys_prompt)
checks.check(s10 == 200 and s11 == 200 and timings(d11).get("pin") == "kept" and
             timings(d11).get("restored_tokens", 0) > 1 and
             serverlib.answer_text(d10) == serverlib.answer_text(d11) and
             d10["usage"]["prompt_tokens"] == d11["usage"]["prompt_tokens"],
             "an image against a pinned system prompt restores the pin (%s / %s)"
             % (raw10[:300], raw11[:300]))

# Text only on the same server still works (and costs no image tokens).
s7, _, d7, raw7 = ask(srv, "What is in this picture?")
checks.check(s7 == 200 and timings(d7).get("image_tokens") == 0,
             "a text request on a vision server (%s)" % raw7[:200])

# A conversation: the image stays in its message, its rows are reused next turn.
turn1 = [{"role": "user", "content": [image_part(photo), text_part("Describe it.")]},
         {"role": "assistant", "content": "A pattern."},
         {"role": "user", "content": "Which colours?"}]
body = {"model": "gemma", "messages": turn1, "max_tokens": 4, "tern": {"image_tokens": 16}}
s8, _, d8, raw8 = srv.post("/v1/chat/completions", body)
body["messages"] = turn1 + [{"role": "assistant", "content": "Many."},
                            {"role": "user", "content": "And the shapes?"}]
s9, _, d9, raw9 = srv.post("/v1/chat/completions", body)
checks.check(s8 == 200 and s9 == 200, "a conversation with an image (%s / %s)"
             % (raw8[:200], raw9[:200]))
if s8 == 200 and s9 == 200:
    checks.check(timings(d9).get("restored_tokens", 0) >= 16 + timings(d8)["restored_tokens"],
                 "the next turn reuses the image's rows (%s)" % timings(d9))
    checks.check(timings(d9).get("images_reused") == 1,
                 "the next turn does not encode the image again (%s)" % timings(d9))

# ------------------------------------------------------------ errors
noisy = png(60, 40, noisy=True)
cases = [
    ("a remote URL", [text_part("hi"), image_part("https://example.com/cat.png")],
     None, "invalid_image_url", "never fetches"),
    ("a file URL", [image_part("file:///etc/passwd")], None, "invalid_image_url", "data: URI"),
    ("not an image", [image_part(data_uri(b"just some text\n"))], None,
     "invalid_image_format", "messages[0].content[0]"),
    ("a truncated PNG", [image_part(data_uri(noisy[:len(noisy) // 2]))], None, "invalid_image",
     "truncated"),
    ("a decompression bomb", [image_part(data_uri(png(16, 16, declared=(100000, 100000))))],
     None, "image_too_large", "100000"),
    # Refused by its first bytes: no SVG renderer ever runs.
    ("an SVG", [image_part(data_uri(b'<svg xmlns="http://www.w3.org/2000/svg" width="60000" '
                                    b'height="60000"><rect width="60000" height="60000"/></svg>'))],
     None, "invalid_image_format", "not an image in a format"),
    # SOI, a JFIF APP0 and a frame header declaring 8000 x 8000, then nothing:
    # a JPEG decoder would grey-fill 64 megapixels.
    ("a JPEG header declaring 8000 x 8000",
     [image_part(data_uri(bytes.fromhex("ffd8ffe000104a46494600010100000100010000"
                                        "ffc0001108") + (8000).to_bytes(2, "big") * 2 +
                          bytes.fromhex("03012200021101031101")))],
     None, "invalid_image", "truncated JPEG"),
    ("two native images over the free context", [image_part(photo), image_part(other)], None,
     "context_length_exceeded", "2 images"),
    ("a marker in the text", [text_part("see <__image__>"), image_part(photo)], 16, None,
     "<__image__>"),
    ("a zero budget", [image_part(photo)], 0, None, "image_tokens"),
    ("an image_url without a url", [{"type": "image_url", "image_url": {}}], None,
     "invalid_image_url", None),
    ("an unknown part type", [{"type": "input_audio", "input_audio": {}}], None, None,
     "input_audio"),
]
for what, parts, budget, code, word in cases:
    s, _, d, raw = ask(srv, parts, budget=budget)
    checks.check(s == 400 and is_error(d, code, word),
                 "%s: 400 %s naming %r (%s: %s)" % (what, code, word, s, raw[:300]))
s, _, d, raw = srv.post("/v1/chat/completions", {
    "model": "gemma", "messages": [{"role": "system", "content": [image_part(photo)]},
                                   {"role": "user", "content": "hi"}]})
checks.check(s == 400 and is_error(d, None, "user messages"),
             "an image in a system message: 400 (%s: %s)" % (s, raw[:300]))
s, h, d, raw = ask(srv, [image_part(data_uri(b"nope"))], stream=True)
checks.check(s == 400 and h.get("content-type", "").startswith("application/json") and
             is_error(d, "invalid_image_format"),
             "a streamed request with a bad image: a plain 400 (%s: %s)" % (s, raw[:300]))
# A progressive JPEG (512 x 512 grey, 6 scans, ImageMagick's -interlace JPEG)
# is read; the same with thousands of copies of its last scan, each empty,
# is refused on its marker structure before the decoder runs: the decoder
# goes over the whole picture again for every scan, and a 199 KB 4096 x 4096
# one of 10,000 scans held a decode thread for 7 minutes (two such requests
# held every one, and the queue behind them).
PROGRESSIVE = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDABALDA4MChAODQ4SERATGCgaGBYWGDEjJR0oOjM9PDkzODdASFxOQERX"
    "RTc4UG1RV19iZ2hnPk1xeXBkeFxlZ2P/wgALCAIAAgABAREA/8QAFQABAQAAAAAAAAAAAAAAAAAAAAH/2gAIAQEA"
    "AAABgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA//8QAFBABAAAAAAAA"
    "AAAAAAAAAAAAwP/aAAgBAQABBQIAB//EABQQAQAAAAAAAAAAAAAAAAAAAMD/2gAIAQEABj8CAAf/xAAUEAEAAAAA"
    "AAAAAAAAAAAAAADA/9oACAEBAAE/IQAH/9oACAEBAAAAEP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A/wD/AP8A"
    "/wD/xAAUEAEAAAAAAAAAAAAAAAAAAADA/9oACAEBAAE/EAAH/9k=")


def with_scans(jpeg, extra):
    """jpeg with extra copies of its last scan header (and no data) before EOI."""
    at = jpeg.rindex(b"\xff\xda")
    header = jpeg[at:at + 2 + int.from_bytes(jpeg[at + 2:at + 4], "big")]
    return jpeg[:jpeg.rindex(b"\xff\xd9")] + header * extra + b"\xff\xd9"


s, _, d, raw = ask(srv, [image_part(data_uri(PROGRESSIVE, "image/jpeg"))], budget=16)
checks.check(s == 200, "a progressive JPEG of 6 scans: 200 (%s: %s)" % (s, raw[:200]))
s, _, d, raw = ask(srv, [image_part(data_uri(with_scans(PROGRESSIVE, 90), "image/jpeg"))],
                   budget=16)
checks.check(s == 200, "a JPEG of 96 scans: 200 (%s: %s)" % (s, raw[:200]))
t0 = time.time()
s, _, d, raw = ask(srv, [image_part(data_uri(with_scans(PROGRESSIVE, 20000), "image/jpeg"))],
                   budget=16)
checks.check(s == 400 and is_error(d, "image_too_large", "scans"),
             "a JPEG of 20,006 scans: 400 image_too_large naming the scans, in %.1f s (%s: %s)"
             % (time.time() - t0, s, raw[:300]))
# The server is still well after every refusal.
s, _, d, raw = ask(srv, question, budget=16)
checks.check(s == 200 and serverlib.answer_text(d) == serverlib.answer_text(d3),
             "after the errors the same request answers the same (%s)" % raw[:200])
# run --remote --image against this server answers exactly what a local run
# with the same image file answers: the same prompt, the same greedy tokens.
photo_path = os.path.join(tmp, "photo.png")
with open(photo_path, "wb") as f:
    f.write(png(60, 40))
cli_env = dict(os.environ, LANGUAGE="C", LC_ALL="C")
for name in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
    cli_env.pop(name, None)
local = subprocess.run([serverlib.env("TERN_CLI"), "run", "-m", model, "--image", photo_path,
                        "-p", "What is in this picture?", "-n", "6", "-c", "300"],
                       capture_output=True, text=True, env=cli_env, errors="replace")
remote = subprocess.run([serverlib.env("TERN_CLI"), "run", "--remote", srv.url + "/v1", "-m",
                         "gemma", "--image", photo_path, "-p", "What is in this picture?", "-n",
                         "6"], capture_output=True, text=True, env=cli_env, errors="replace")


def prefilled(err):
    """Prompt tokens prefilled: a local run counts those (the pin it restored
    apart); the server reports them all, and the restored ones as cached."""
    for line in err.splitlines():
        if line.startswith("[prompt "):
            fields = line.strip("[]").split(" | ")
            cached = [f.split()[1] for f in fields if f.startswith("cached ")]
            return int(line.split()[1]) - (int(cached[0]) if cached else 0)
    return None


checks.check(local.returncode == 0 and remote.returncode == 0 and local.stdout
             and local.stdout == remote.stdout
             and prefilled(local.stderr) == prefilled(remote.stderr) is not None
             and prefilled(local.stderr) > 256,
             "run --remote --image answers as run --image: %r %r / %r %r"
             % (local.stdout, local.stderr[-300:], remote.stdout, remote.stderr[-300:]))

code = srv.stop()
checks.check(code == 0, "the vision server stops cleanly (status %s)" % code)

# ------------------------------------------------------------ stopping
# SIGTERM while a slow answer runs and an image request waits behind it:
# the waiting one gets 503, the server exits 0 (and, under ASan, leaks nothing).
slow = serverlib.Server(tmp, "slow", model, ["--debug-token-delay", "200"])
results = {}


def send(name, parts, max_tokens):
    try:
        results[name] = ask(slow, parts, budget=16, max_tokens=max_tokens)
    except Exception as err:  # noqa: BLE001 - a dropped connection is a result too
        results[name] = (None, None, None, repr(err).encode())


running = threading.Thread(target=send, args=("running", "Tell me a long story.", 200))
running.start()
time.sleep(1.0)
waiting = threading.Thread(target=send, args=("waiting", question, 4))
waiting.start()
time.sleep(1.0)
code = slow.stop()
running.join(30)
waiting.join(30)
s, _, d, raw = results.get("waiting", (None, None, None, b"no answer"))
checks.check(s == 503 and (d or {}).get("error", {}).get("code") == "cancelled",
             "an image request waiting at SIGTERM: 503 cancelled (%s: %s)" % (s, raw[:300]))
checks.check(code == 0, "the server stops cleanly with an image request waiting (status %s: %s)"
             % (code, slow.stderr()[-500:]))

# ------------------------------------------------------------ no projector
plain_dir = os.path.join(tmp, "plain")
os.makedirs(plain_dir)
plain_model = os.path.join(plain_dir, "gemma.gguf")
shutil.copy(model, plain_model)
plain = serverlib.Server(tmp, "plain", plain_model)
checks.check("images:" not in open(plain.out_path).read(), "no projector: images are off")
s, _, d, raw = ask(plain, question)
checks.check(s == 400 and is_error(d, "model_not_vision", "no vision projector"),
             "an image for a model served without a projector: 400 naming why (%s: %s)"
             % (s, raw[:300]))
s, _, d, raw = ask(plain, "Hello")
checks.check(s == 200, "text still works without a projector (%s)" % raw[:200])
checks.check(plain.stop() == 0, "the plain server stops cleanly")

# A projector for a model whose vocabulary has no image markers: refused at start.
llama = serverlib.make_model(plain_dir, name="llama")
r = serverlib.serve_refused(llama, ["--mmproj", projector])
checks.check(r.returncode == 2 and "takes no images" in r.stderr,
             "--mmproj with a model that takes no images: exit 2 (%d: %s)"
             % (r.returncode, r.stderr[-300:]))
r = serverlib.serve_refused(plain_model, ["--mmproj", os.path.join(tmp, "missing-mmproj.gguf")])
checks.check(r.returncode == 2 and "missing-mmproj.gguf" in r.stderr,
             "--mmproj naming a missing file: exit 2 naming it (%d: %s)"
             % (r.returncode, r.stderr[-300:]))
# The one projector beside a model whose vocabulary has no image markers (its
# width fits): images are off with a note, and text is served. Found, not
# named, it stopped the server (exit 2), as a named one still does above.
lone_dir = os.path.join(tmp, "lone")
os.makedirs(lone_dir)
lone_model = os.path.join(lone_dir, "gemma.gguf")
shutil.copy(llama, lone_model)
shutil.copy(projector, os.path.join(lone_dir, "gemma-mmproj.gguf"))
lone = serverlib.Server(tmp, "lone", lone_model)
checks.check("images:" not in open(lone.out_path).read() and "no image tokens" in lone.stderr(),
             "a projector beside a model without image tokens: images off, with a note (%s)"
             % lone.stderr())
s, _, d, raw = ask(lone, question)
checks.check(s == 400 and is_error(d, "model_not_vision"),
             "that server refuses images (%s: %s)" % (s, raw[:200]))
s, _, d, raw = ask(lone, "Hello")
checks.check(s == 200, "and answers text (%s)" % raw[:200])
checks.check(lone.stop() == 0, "the server with a projector it cannot use stops cleanly")
# Two projectors beside the model: which one is unknown, so images are off
# (with a note), and text is served.
shutil.copy(projector, os.path.join(plain_dir, "a-mmproj.gguf"))
shutil.copy(projector, os.path.join(plain_dir, "b-mmproj.gguf"))
two = serverlib.Server(tmp, "two", plain_model)
checks.check("images:" not in open(two.out_path).read() and "--mmproj" in two.stderr(),
             "two projectors beside the model: images off, with a note (%s)" % two.stderr())
s, _, d, raw = ask(two, question)
checks.check(s == 400 and is_error(d, "model_not_vision"), "two projectors: images refused")
checks.check(two.stop() == 0, "the two-projector server stops cleanly")
checks.finish()
