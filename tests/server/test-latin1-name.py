#!/usr/bin/env python3
"""A model file whose name is not UTF-8 (docs/SERVER.md, "The model's id"):
tern-cli serve -m 'mod\\xe9l.gguf' named the model by its file name in its
own bytes, so /v1/models and every answer's "model" carried a Latin-1 byte:
no JSON, and a client's UTF-8 decoder refused the whole answer. The id is
now the file name as GLib shows it, "mod\\ufffdl", valid UTF-8. The CLI with
the same file: run answers, import says what it imported in UTF-8 (its
message printed the raw byte) and list reads the store again (the raw byte
in installed.json made every later read of it fail)."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("latin1-name")
# The bytes as a file system holds them; os.fsdecode keeps 0xE9 as it is.
model = serverlib.make_model(tmp, name=os.fsdecode(b"mod\xe9l"))
check(os.path.exists(os.fsencode(model)) and b"\xe9" in os.fsencode(model),
      "mkmodel wrote the Latin-1 name")
srv = serverlib.Server(tmp, "latin1-name", model)


def strict_json(out):
    """The answer as JSON read strictly as UTF-8, or None."""
    try:
        return json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


s, _, out = srv.request("GET", "/v1/models")
doc = strict_json(out)
ids = [m.get("id") for m in (doc or {}).get("data", [])]
check(s == 200 and doc is not None, "/v1/models is UTF-8 JSON (got %s %r)" % (s, out[:200]))
check(ids == ["mod\ufffdl"], "the model's id is the readable file name (got %r)" % (ids,))
s, _, _, out = srv.post("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
doc = strict_json(out)
check(s == 200 and doc is not None and doc.get("model") == "mod\ufffdl",
      "an answer is UTF-8 JSON naming the model (got %s %r)" % (s, out[:300]))
rc = srv.stop()
check(rc == 0, "the server stopped cleanly (%s: %s)" % (rc, srv.stderr()[-500:]))

cli = serverlib.env("TERN_CLI")
e = dict(os.environ, XDG_DATA_HOME=os.path.join(tmp, "data"), XDG_CACHE_HOME=os.path.join(tmp, "cache"))
r = subprocess.run([cli, "run", "-m", model, "-p", "hi", "-n", "2", "-t", "1"], capture_output=True, env=e)
check(r.returncode == 0, "tern-cli run opens it (%d: %r)" % (r.returncode, r.stderr[-300:]))
r = subprocess.run([cli, "import", model], capture_output=True, env=e)
said = r.stdout.decode("utf-8", "replace")
check(r.returncode == 0 and r.stdout.startswith(b"imported ") and b"\xe9" not in r.stdout,
      "tern-cli import says what it imported in UTF-8 (%d: %r %r)" % (r.returncode, r.stdout, r.stderr))
r = subprocess.run([cli, "list", "--json"], capture_output=True, env=e)
doc = strict_json(r.stdout) if r.returncode == 0 else None
check(doc is not None and "local:" in r.stdout.decode("utf-8", "replace"),
      "tern-cli list reads the store again, the import in it (%d: %r)" % (r.returncode, r.stderr[-300:]))
checks.finish()
