#!/usr/bin/env python3
"""The official `openai` npm client (installed here through npm into the
build directory) against tern-cli serve: models, chat and completions,
streaming and not, usage, errors (404, 400, 401), an image part for a
synthetic Gemma 3 with a projector. The checks are in openai-client.js."""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

# openai 4 sent through node-fetch 2, whose "Premature close" on reused
# connections (a client-side false alarm) failed this test on Debian 12's
# Node.js 18; 5 and later use Node's own fetch. An exact version: the same
# client everywhere, checked on Node 18 (Debian 12) and 20.
PACKAGE = "openai@6.49.0"

node, npm = shutil.which("node"), shutil.which("npm")
if not node or not npm:
    serverlib.cannot_run("node and npm are needed (tools/ensure-deps.sh test installs them)")

tmp_root = serverlib.env("TERN_TEST_TMP")
prefix = os.path.join(os.path.dirname(os.path.abspath(tmp_root)), "openai-node")
module = os.path.join(prefix, "node_modules", "openai")


def installed_version():
    try:
        with open(os.path.join(module, "package.json")) as f:
            return json.load(f).get("version")
    except (OSError, ValueError):
        return None


if installed_version() != PACKAGE.split("@", 1)[1]:
    os.makedirs(prefix, exist_ok=True)
    r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", prefix, PACKAGE],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not os.path.isfile(os.path.join(module, "package.json")):
        serverlib.cannot_run("npm install %s failed: %s" % (PACKAGE, (r.stdout + r.stderr)[-500:]))

gemma_vocab = serverlib.real_vocab("gemma3")

tmp = serverlib.workdir("openai")
model = serverlib.make_model(tmp)
open_srv = serverlib.Server(tmp, "open", model)
key_srv = serverlib.Server(tmp, "key", model, ["--api-key", "sekret-key"])
vision_dir = os.path.join(tmp, "vision")
os.makedirs(vision_dir)
gemma = serverlib.make_model(vision_dir, name="gemma", vocab=gemma_vocab, arch="gemma3")
serverlib.make_projector(vision_dir, gemma, "gemma3-vision",
                         ["--image-size", "128", "--patch", "2", "--embd", "32", "--ff", "64",
                          "--layers", "1", "--heads", "2"], "mmproj-f32.gguf")
vision_srv = serverlib.Server(tmp, "vision", gemma)


png = serverlib.png(32, 24, lambda y: bytes((x * 3 + y * 13) % 256 for x in range(3 * 32)))
e = dict(os.environ)
e.update(OPENAI_MODULE=module, TERN_URL=open_srv.url, TERN_KEY_URL=key_srv.url,
         TERN_KEY="sekret-key", TERN_VISION_URL=vision_srv.url,
         TERN_IMAGE_URI=serverlib.data_uri(png))
r = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "openai-client.js")], env=e, timeout=300)
codes = (open_srv.stop(), key_srv.stop(), vision_srv.stop())
if codes != (0, 0, 0):
    print("FAIL: the servers did not stop cleanly: %s" % (codes,), file=sys.stderr)
sys.exit(0 if r.returncode == 0 and codes == (0, 0, 0) else 1)
