#!/usr/bin/env python3
"""The examples of docs/SERVER.md, run as written.

Every ```sh block of the document is run with `sh -e` against a server on a
tiny synthetic Qwen3-architecture model (real Qwen3 vocabulary) whose file is
named like the model the examples name, with only TERN_URL (the variable the
examples use for the address) set to the server's address. The blocks that
send images go to a server on a tiny synthetic Gemma 3 (real vocabulary)
with a synthetic projector beside it, named like the model those blocks
name, and run in a directory holding the photo.png they read. Each block
must exit 0 and print answers: JSON without an error object, or an SSE
stream ending in [DONE]."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
doc_path = os.path.join(serverlib.env("TERN_SOURCE_ROOT"), "docs", "SERVER.md")
doc = open(doc_path).read()
blocks = re.findall(r"^```sh\n(.*?)^```", doc, re.S | re.M)
checks.check(len(blocks) >= 5, "docs/SERVER.md has its curl examples in ```sh blocks (%d found)"
             % len(blocks))


def model_ids(bs):
    return set(re.findall(r'"model": "([^"]+)"', "".join(bs)))


image_blocks = [b for b in blocks if "image_url" in b]
ids = model_ids(b for b in blocks if b not in image_blocks)
checks.check(len(ids) == 1, "the text examples name one model: %s" % sorted(ids))
model_id = ids.pop() if ids else "qwen3:0.6b"
vision_ids = model_ids(image_blocks)
checks.check(len(image_blocks) >= 1 and len(vision_ids) == 1,
             "the image examples (%d) name one model: %s" % (len(image_blocks),
                                                             sorted(vision_ids)))

vocab = serverlib.real_vocab("qwen3")
gemma_vocab = serverlib.real_vocab("gemma3")

tmp = serverlib.workdir("docs")
model = serverlib.make_model(tmp, name=model_id, vocab=vocab, arch="qwen3")
srv = serverlib.Server(tmp, "docs", model)

vision_dir = os.path.join(tmp, "vision")
os.makedirs(vision_dir)
vision_model = serverlib.make_model(vision_dir, name=vision_ids.pop() if vision_ids else "v",
                                    vocab=gemma_vocab, arch="gemma3")
serverlib.make_projector(vision_dir, vision_model, "gemma3-vision",
                         ["--image-size", "128", "--patch", "2", "--embd", "32", "--ff", "64",
                          "--layers", "1", "--heads", "2"], "mmproj-f32.gguf", checks=checks)
vision_srv = serverlib.Server(tmp, "docs-vision", vision_model)
photo_dir = os.path.join(tmp, "photos")
os.makedirs(photo_dir)


with open(os.path.join(photo_dir, "photo.png"), "wb") as f:
    f.write(serverlib.png(80, 50, lambda y: bytes((x * 5 + y * 11) % 256 for x in range(3 * 80))))

for i, block in enumerate(blocks):
    checks.check("$TERN_URL" in block and "127.0.0.1" not in block and "localhost" not in block,
                 "block %d reaches the server through $TERN_URL only" % (i + 1))
    e = dict(os.environ)
    image = block in image_blocks
    e["TERN_URL"] = vision_srv.url if image else srv.url
    r = subprocess.run(["sh", "-e", "-c", block], capture_output=True, env=e, timeout=120,
                       cwd=photo_dir if image else None)
    out = r.stdout.decode("utf-8", "replace")
    what = "block %d (%s...)" % (i + 1, block.strip().splitlines()[0][:60])
    checks.check(r.returncode == 0, "%s exits 0 (%d: %s)" % (what, r.returncode,
                                                            r.stderr.decode()[-300:]))
    checks.check('"error":' not in out, "%s: no error object in %s" % (what, out[:300]))
    n_curl = len(re.findall(r"^\s*curl ", block, re.M))
    # Every curl prints one JSON document or one SSE stream; count them.
    n_answers = 0
    rest = out
    while rest.strip():
        rest = rest.lstrip()
        if rest.startswith("data: "):
            end = rest.find("data: [DONE]")
            if not checks.check(end >= 0, "%s: the stream ends with [DONE]" % what):
                break
            try:
                serverlib.sse_events(rest[:end + len("data: [DONE]")].encode())
            except ValueError as err:
                checks.check(False, "%s: SSE framing: %s" % (what, err))
            rest = rest[end + len("data: [DONE]"):]
        else:
            try:
                d, used = json.JSONDecoder().raw_decode(rest)
            except ValueError:
                checks.check(False, "%s: not JSON: %r" % (what, rest[:200]))
                break
            if "choices" in d:
                checks.check(d["usage"]["completion_tokens"] > 0, "%s: an answer with usage" % what)
                if image:
                    checks.check(d["usage"]["timings"]["image_tokens"] > 0,
                                 "%s: the image is in the prompt (%s)" % (what, d["usage"]))
            rest = rest[used:]
        n_answers += 1
    checks.check(n_answers == n_curl, "%s: %d answers for %d curl commands" % (what, n_answers, n_curl))

code = srv.stop()
checks.check(code == 0, "the server stops cleanly (status %s)" % code)
code = vision_srv.stop()
checks.check(code == 0, "the vision server stops cleanly (status %s)" % code)
checks.finish()
