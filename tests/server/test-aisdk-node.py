#!/usr/bin/env python3
"""Vercel's AI SDK (`ai` + `@ai-sdk/openai-compatible`, installed here through
npm into the build directory) against tern-cli serve: generateText,
streamText, cached tokens from the pin, seeded sampling, an agent
conversation with a tool call and its result, an abort, errors. The checks
are in aisdk-client.js."""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

# Exact versions, the same client everywhere. ai 7 needs Node.js 22; the 6.x
# line runs on Debian 12's Node.js 18 (checked there and on 20).
PACKAGES = ["ai@6.0.325", "@ai-sdk/openai-compatible@2.0.92", "zod@4.1.12"]

node, npm = shutil.which("node"), shutil.which("npm")
if not node or not npm:
    serverlib.cannot_run("node and npm are needed (tools/ensure-deps.sh test installs them)")

tmp_root = serverlib.env("TERN_TEST_TMP")
prefix = os.path.join(os.path.dirname(os.path.abspath(tmp_root)), "aisdk-node")


def installed(spec):
    name, version = spec.rsplit("@", 1)
    try:
        with open(os.path.join(prefix, "node_modules", name, "package.json")) as f:
            return json.load(f).get("version") == version
    except (OSError, ValueError):
        return False


if not all(installed(p) for p in PACKAGES):
    os.makedirs(prefix, exist_ok=True)
    r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", prefix] + PACKAGES,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not all(installed(p) for p in PACKAGES):
        serverlib.cannot_run("npm install %s failed: %s"
                             % (" ".join(PACKAGES), (r.stdout + r.stderr)[-500:]))

vocab = serverlib.real_vocab("qwen3")

tmp = serverlib.workdir("aisdk")
model = serverlib.make_model(tmp, name="qwen3", vocab=vocab, arch="qwen3")
open_srv = serverlib.Server(tmp, "open", model)
key_srv = serverlib.Server(tmp, "key", model, ["--api-key", "sekret-key"])
e = dict(os.environ)
e.update(AISDK_PREFIX=prefix, TERN_URL=open_srv.url, TERN_KEY_URL=key_srv.url, TERN_KEY="sekret-key")
r = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "aisdk-client.js")], env=e, timeout=300)
codes = (open_srv.stop(), key_srv.stop())
if codes != (0, 0):
    print("FAIL: the servers did not stop cleanly: %s" % (codes,), file=sys.stderr)
sys.exit(0 if r.returncode == 0 and codes == (0, 0) else 1)
