#!/usr/bin/env python3
"""The official `openai` npm client (installed here through npm into the
build directory) against tern-cli serve: models, chat and completions,
streaming and not, usage, errors (404, 400, 401). The checks are in
openai-client.js."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

PACKAGE = "openai@4"

node, npm = shutil.which("node"), shutil.which("npm")
if not node or not npm:
    serverlib.cannot_run("node and npm are needed (tools/ensure-deps.sh test installs them)")

tmp_root = serverlib.env("TERN_TEST_TMP")
prefix = os.path.join(os.path.dirname(os.path.abspath(tmp_root)), "openai-node")
module = os.path.join(prefix, "node_modules", "openai")
if not os.path.isfile(os.path.join(module, "package.json")):
    os.makedirs(prefix, exist_ok=True)
    r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", prefix, PACKAGE],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not os.path.isfile(os.path.join(module, "package.json")):
        serverlib.cannot_run("npm install %s failed: %s" % (PACKAGE, (r.stdout + r.stderr)[-500:]))

tmp = serverlib.workdir("openai")
model = serverlib.make_model(tmp)
open_srv = serverlib.Server(tmp, "open", model)
key_srv = serverlib.Server(tmp, "key", model, ["--api-key", "sekret-key"])
e = dict(os.environ)
e.update(OPENAI_MODULE=module, TERN_URL=open_srv.url, TERN_KEY_URL=key_srv.url,
         TERN_KEY="sekret-key")
r = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "openai-client.js")], env=e, timeout=300)
codes = (open_srv.stop(), key_srv.stop())
if codes != (0, 0):
    print("FAIL: the servers did not stop cleanly: %s" % (codes,), file=sys.stderr)
sys.exit(0 if r.returncode == 0 and codes == (0, 0) else 1)
