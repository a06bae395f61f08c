"""tern-cli list --json is strict JSON whatever the catalog's strings hold
(cli/cmd-models.c): json-glib 1.6 writes U+001F raw, which strict readers
(Python's json, JavaScript's JSON.parse) refuse, so every JSON text Tern
writes goes through tn_json_escape_unit_separators; list --json did not, and
a catalog's label or description holding one broke a script reading it.

usage: test-list-json.py TERN_CLI"""

import json
import os
import subprocess
import sys
import tempfile

CLI = sys.argv[1]
tmp = tempfile.mkdtemp(prefix="list-json.", dir=os.environ.get("TERN_TEST_TMP"))
catalog = {
    "schema": 1,
    "packages": {"p1": {"label": "P", "files": [{
        "name": "m.gguf", "url": "https://example.com/m.gguf", "size": 10,
        "sha256": "a" * 64}]}},
    "families": [{"id": "fam", "label": "Fam\x1f", "tags": [{
        "tag": "fam:1b", "label": "1B\x1fone", "description": "tiny\x1f model", "base": "p1"}]}],
}
path = os.path.join(tmp, "catalog.json")
with open(path, "w") as f:
    json.dump(catalog, f)  # writes "\u001f": the catalog itself is strict
env = dict(os.environ, XDG_DATA_HOME=os.path.join(tmp, "data"),
           XDG_CACHE_HOME=os.path.join(tmp, "cache"))
r = subprocess.run([CLI, "list", "--json", "--catalog", path], capture_output=True, env=env)
failures = 0
if r.returncode != 0:
    print("FAIL: list --json: exit %d: %r" % (r.returncode, r.stderr[-300:]))
    sys.exit(1)
try:
    tags = json.loads(r.stdout.decode("utf-8"))  # strict: a raw control character fails
except ValueError as e:
    print("FAIL: list --json is not strict JSON: %s: %r" % (e, r.stdout[:300]))
    sys.exit(1)
got = {t.get("tag"): t for t in tags}
t = got.get("fam:1b", {})
if t.get("label") != "1B\x1fone" or t.get("description") != "tiny\x1f model":
    print("FAIL: list --json changed the strings: %r" % t)
    sys.exit(1)
print("ok: list --json is strict JSON and keeps U+001F (%d tags)" % len(tags))
