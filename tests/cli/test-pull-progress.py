"""tern-cli pull's progress line in German (cli/cmd-models.c), from a stand-in
server in this process that sends the file slowly enough for a few ticks:
on a terminal ("\\r...": the size, the speed, the time left) and in a log (a
line per tenth), the whole line is translated, not only its "1 h 05 min".

usage: test-pull-progress.py TERN_CLI LOCALEDIR (the build tree's catalogs)"""

import hashlib
import http.server
import json
import os
import pty
import re
import select
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

CLI, LOCALEDIR = sys.argv[1], sys.argv[2]
DATA = bytes(range(256)) * 4096  # 1 MiB
failures = []


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name + ("" if ok else "\n" + detail))
    if not ok:
        failures.append(name)


class Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(DATA)))
        self.end_headers()
        try:
            step = len(DATA) // 32
            for i in range(0, len(DATA), step):
                self.wfile.write(DATA[i:i + step])
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Slow)
threading.Thread(target=server.serve_forever, daemon=True).start()
tmp = tempfile.mkdtemp()
catalog = os.path.join(tmp, "models.json")
packages, tags = {}, []
for name in ("tty", "log"):
    packages["p-" + name] = {"label": "P", "files": [{
        "name": "m.gguf", "url": "http://127.0.0.1:%d/%s.gguf" % (server.server_address[1], name),
        "size": len(DATA), "sha256": hashlib.sha256(DATA).hexdigest()}]}
    tags.append({"tag": "t:" + name, "label": "T", "description": "d", "base": "p-" + name})
with open(catalog, "w") as f:
    json.dump({"schema": 1, "packages": packages,
               "families": [{"id": "t", "label": "T", "description": "d", "tags": tags}]}, f)


def env_of():
    e = dict(os.environ, LANGUAGE="de", LANG="C.UTF-8", TERN_LOCALEDIR=LOCALEDIR,
             XDG_DATA_HOME=os.path.join(tmp, "data"), TERM="xterm")
    e.pop("LC_ALL", None)
    e.pop("LC_MESSAGES", None)
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                 "ALL_PROXY"):
        e.pop(name, None)
    return e


# On a terminal: standard error is a pseudo-terminal.
master, slave = pty.openpty()
p = subprocess.Popen([CLI, "pull", "--catalog", catalog, "t:tty"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=slave, env=env_of())
os.close(slave)
seen = b""
while True:
    r, _, _ = select.select([master], [], [], 60)
    if not r:
        break
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
p.wait(timeout=60)
os.close(master)
text = seen.decode("utf-8", "replace")
lines = [t for t in re.split(r"[\r\n]", text) if "t:tty: " in t and "%" in t]
# A tick that comes while the finished file is checked says so instead
# ("Checking the download: 0%"): when one comes is up to the scheduler.
checking = [t for t in lines if "Download wird geprüft: " in t]
ticks = [t for t in lines if t not in checking]
check("pull on a terminal: the check's line in German, if one came",
      all("Checking" not in t for t in lines), "\n".join(lines))
check("pull on a terminal: exit 0", p.returncode == 0, text)
check("pull on a terminal: progress lines", len(ticks) > 0, text)
check("pull on a terminal: the progress line in German",
      ticks != [] and all(" von " in t and " of " not in t for t in ticks), "\n".join(ticks))
check("pull on a terminal: the time left in German, not 'left'",
      all(" left" not in t for t in ticks) and any(", noch " in t for t in ticks),
      "\n".join(ticks))

# In a log: a line per tenth.
r = subprocess.run([CLI, "pull", "--catalog", catalog, "t:log"], capture_output=True,
                   text=True, env=env_of(), timeout=120)
lines = [l for l in r.stderr.splitlines() if l.startswith("t:log: ")]
check("pull in a log: exit 0", r.returncode == 0, r.stderr)
check("pull in a log: a line per tenth, in German",
      lines != [] and all(re.fullmatch(r"t:log: \d+ % von \S+ \S+", l) for l in lines),
      r.stderr)

server.shutdown()
sys.exit(1 if failures else 0)
