"""tern-cli's model commands in German, as a user reads them (cli/cmd-models.c,
cli/cmd-doctor.c): list, pull, remove, check and doctor on a store of their own,
over the shipped catalog's tags, whose files come from a stand-in server in
this process (one small file per package, with its own size and sha256).

- No line they print holds an English word of their messages ("nothing new to
  download", "size unknown", "kept ...", "the file is damaged", a Hugging Face
  tag's "From ... at revision ..."): tags, paths and the catalog's names are
  taken out of a line first.
- list's columns line up, a German "Größe unbekannt" as wide as it is.
- list shows each tag's own description under it, translated (the
  translation read from the built catalog with Python's gettext, so that it is
  not written here twice); it showed only the family's.
- Every description and worded label of the catalog has a translation in each
  language of po/LINGUAS: a catalog changed without its po entries fails here
  too, not only in po-complete.

usage: test-cli-words.py TERN_CLI LOCALEDIR MODELS_JSON"""

import gettext
import hashlib
import http.server
import json
import os
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading

CLI, LOCALEDIR, SHIPPED = sys.argv[1], sys.argv[2], sys.argv[3]
DATA = bytes(range(256)) * 64  # 16 KiB: every package's one file
failures = []

# Words of the English messages of list, pull, remove, check and doctor that
# no German line says (case matters: "Download" is German too).
ENGLISH = [
    "available", "installed", "partial", "broken", "nothing new", "download", "size unknown",
    "pulling", "already", "removed", "freed", "kept", "still used", "intact", "damaged",
    "checking", "needs", "support", "vision projector", "assistant head", "draft",
    "speculation", "parameters", "answers", "context", "reads images", "can run",
    "cannot run", "fix:", "not found", "missing", "From", "at revision",
]
ENGLISH_RE = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in ENGLISH) + r")(?![\w-])")


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name + ("" if ok else "\n" + detail))
    if not ok:
        failures.append(name)


class Files(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        body, kind = DATA, "application/octet-stream"
        if self.path.startswith("/api/models/o/r/revision/"):
            # The Hub's listing, for pull hf.co/o/r (docs/MODELS.md).
            body, kind = json.dumps({"id": "o/r", "sha": "c" * 40, "siblings": [
                {"rfilename": "r-Q4_K_M.gguf", "size": len(DATA), "lfs": {
                    "sha256": hashlib.sha256(DATA).hexdigest(), "size": len(DATA)}}]}).encode(), \
                "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Files)
threading.Thread(target=server.serve_forever, daemon=True).start()

with open(SHIPPED, encoding="utf-8") as f:
    shipped = json.load(f)
catalog = json.loads(json.dumps(shipped))
for pid, package in catalog["packages"].items():
    name = package["files"][0]["name"]
    package["files"] = [{"name": name, "url": "http://127.0.0.1:%d/%s/%s" % (
        server.server_address[1], pid, name), "size": len(DATA),
        "sha256": hashlib.sha256(DATA).hexdigest()}]
# A size the catalog leaves to the server: list says "size unknown".
del catalog["packages"]["gpt-oss-20b-mxfp4"]["files"][0]["size"]
# No English word in the directory's name: it is in the paths printed.
if os.environ.get("TERN_TEST_TMP"):
    os.makedirs(os.environ["TERN_TEST_TMP"], exist_ok=True)
tmp = tempfile.mkdtemp(prefix="woerter.", dir=os.environ.get("TERN_TEST_TMP"))
catalog_path = os.path.join(tmp, "models.json")
with open(catalog_path, "w", encoding="utf-8") as f:
    json.dump(catalog, f)

tags = [t for fam in shipped["families"] for t in fam["tags"]]
# What a line may name in any language: tags, the catalog's names, paths.
names = sorted({t["tag"] for t in tags} | {f["label"] for f in shipped["families"]} |
               {t["label"] for t in tags if "(" not in t["label"] and "," not in t["label"]} |
               {p["label"] for pid, p in shipped["packages"].items()
                if not any(t.get("vision") == pid or t.get("draft_kind") and t.get("draft") == pid
                           for t in tags)},
               key=len, reverse=True)


def env_of(lang):
    e = dict(os.environ, LANGUAGE=lang, LANG="C.UTF-8", TERN_LOCALEDIR=LOCALEDIR,
             XDG_DATA_HOME=os.path.join(tmp, "data"), XDG_CACHE_HOME=os.path.join(tmp, "cache"),
             TERN_CATALOG=catalog_path, HF_ENDPOINT="http://127.0.0.1:%d" % server.server_address[1])
    e.pop("HF_TOKEN", None)
    for name in ("LC_ALL", "LC_MESSAGES", "http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                 "HTTPS_PROXY", "ALL_PROXY"):
        e.pop(name, None)
    return e


outputs = []


def run(*args, want=0, lang="de"):
    r = subprocess.run([CLI] + list(args), capture_output=True, env=env_of(lang), timeout=120,
                       stdin=subprocess.DEVNULL)
    text = (r.stdout + r.stderr).decode("utf-8", "replace")
    check("tern-cli %s: exit %d" % (" ".join(args), want), r.returncode == want,
          "exit %d:\n%s" % (r.returncode, text))
    if lang == "de":
        outputs.append((" ".join(args), text))
    return r.stdout.decode("utf-8", "replace")


def english_in(text):
    found = []
    for line in text.splitlines():
        bare = line
        # Paths are the machine's: the doctor names the repack cache's.
        for path in (tmp, os.environ.get("TERN_REPACK_CACHE"), os.path.expanduser("~")):
            if path and len(path) > 1:
                bare = bare.replace(path, "")
        for n in names:
            bare = bare.replace(n, "")
        m = ENGLISH_RE.search(bare)
        if m:
            found.append("%r in: %s" % (m.group(1), line))
    return found


listed = run("list")
run("pull", "qwen3:0.6b")
run("pull", "qwen3:0.6b")  # already installed
listed_after = run("list")  # qwen3:0.6b-flash: nothing new to download
run("pull", "qwen3:1.7b")  # its draft is qwen3:0.6b's file
run("remove", "qwen3:1.7b")  # keeps the draft: still used by qwen3:0.6b
run("pull", "gemma3:4b")  # with its vision projector
run("check")
victim = None
for root, _, files in os.walk(os.path.join(tmp, "data")):
    for name in files:
        if "gemma3-4b-mmproj" in root and not name.endswith(".json"):
            victim = os.path.join(root, name)
check("the vision projector's file is in the store", victim is not None)
if victim:
    with open(victim, "r+b") as f:
        f.write(b"\xff" * 16)
    run("check", want=2)
    listed_broken = run("list")
    run("pull", "gemma3:4b")  # repairs it
run("remove", "gemma3:4b")
run("pull", "nosuch:model", want=2)
run("pull", "hf.co/o/r:Q4_K_M")  # "... is TAG (From hf.co/o/r at revision ...)"
run("remove", "hf.co/o/r:Q4_K_M")
# The doctor's exit status is the machine's (a CPU that cannot run is 3).
r = subprocess.run([CLI, "doctor", "--quick"], capture_output=True, env=env_of("de"), timeout=120)
outputs.append(("doctor --quick", (r.stdout + r.stderr).decode("utf-8", "replace")))
check("tern-cli doctor --quick: exit 0 or 3 (what the machine runs)", r.returncode in (0, 3),
      "exit %d:\n%s" % (r.returncode, outputs[-1][1]))

for command, text in outputs:
    found = english_in(text)
    check("tern-cli %s: no English word in German" % command, not found,
          "\n".join(found) + "\n--- the whole output:\n" + text)

# Each tag's own description, under its line, in German.
de = gettext.translation("tern", LOCALEDIR, ["de"])


def blocks(text):
    """tag -> the words under its line (a description wrapped over lines)."""
    out, tag = {}, None
    for line in text.splitlines():
        m = re.match(r"^  (\S+) ", line)
        if m and not line.startswith("   "):
            tag = m.group(1)
            out[tag] = ""
        elif tag and line.startswith("      "):
            out[tag] += " " + line.strip()
        else:
            tag = None
    return {k: " ".join(v.split()) for k, v in out.items()}


shown = blocks(listed)
for t in tags:
    want = " ".join(de.gettext(t["description"]).split())
    got = shown.get(t["tag"])
    check("list: %s's own description in German" % t["tag"],
          want != t["description"] and got == want,
          "under %s: %r\nwanted: %r" % (t["tag"], got, want))

# The table's columns line up in German too: %12s counted a size's bytes,
# and "Größe unbekannt" (gpt-oss:20b, no size in this catalog) pushed its
# row's state out of line.
states = {de.gettext(w) for w in ("available", "installed", "broken")}
starts = set()
for line in listed_after.splitlines():
    if re.match(r"^  \S+ ", line) and not line.startswith("   "):
        at = [line.find("  " + w + " ") for w in states if ("  " + w + " ") in line]
        starts.add(min(at) if at else -1)
check("list: every row's state in one column", len(starts) == 1 and -1 not in starts,
      "state columns %r in:\n%s" % (sorted(starts), listed_after))

# The catalog's words have a translation in every language (no drift
# between models.json and po/).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "po",
                       "LINGUAS")) as f:
    languages = [w for line in f for w in line.split("#")[0].split()]
for lang in languages:
    tr = gettext.translation("tern", LOCALEDIR, [lang])
    missing = [s for s in [f["description"] for f in shipped["families"]] +
               [t["description"] for t in tags] +
               [t["label"] for t in tags if "(" in t["label"] or "," in t["label"]]
               if s not in tr._catalog]  # "(vision)" is French too: present, not changed
    check("every catalog description and worded label translated in %s" % lang, not missing,
          "\n".join(missing))

shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print("%d failed" % len(failures))
    sys.exit(1)
print("all passed")
