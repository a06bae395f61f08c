"""tern-cli run --remote against llama.cpp's llama-server (docs/REMOTE.md).

The npm package @node-llama-cpp/linux-x64 that tools/llamacpp-compare.sh
installs ships libllama, libllama-common and ggml but no llama-server (and
no libmtmd, which the server links). tools/llama-server-from-npm.sh compiles
the server and libmtmd from the source bundled in the same npm package and
links them against those prebuilt libraries. $TERN_LLAMA_SERVER, when set,
names a llama-server binary to use instead (a full llama.cpp build). The test
is skipped, with a message, only when the package cannot be fetched. It
checks the streamed answer, llama-server's `timings` and its prompt cache
(cache_n) as the stats line shows them, the API key, a model id the server
does not have, and the server killed in the middle of an answer."""

import os
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

binary = os.environ.get("TERN_LLAMA_SERVER", "")
if binary and not os.access(binary, os.X_OK):
    print("FAIL: TERN_LLAMA_SERVER=%s is not an executable" % binary, file=sys.stderr)
    sys.exit(1)
if not binary:
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                          "llama-server-from-npm.sh")
    r = subprocess.run(["sh", script], capture_output=True, text=True)
    if r.returncode == 77:
        print("skipped: no llama-server: " + r.stderr.strip())
        sys.exit(77)
    if r.returncode != 0:
        print("FAIL: tools/llama-server-from-npm.sh: " + r.stderr[-2000:], file=sys.stderr)
        sys.exit(1)
    binary = r.stdout.strip().splitlines()[-1]
print("llama-server: " + binary)

CLI = serverlib.env("TERN_CLI")
checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("remote-llama")
model = serverlib.make_model(tmp)
no_bus = os.path.join(tmp, "no-bus")
os.makedirs(no_bus, mode=0o700, exist_ok=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(args):
    port = free_port()
    log = open(os.path.join(tmp, "llama-server.%d.log" % port), "w")
    p = subprocess.Popen([binary, "-m", model, "--host", "127.0.0.1", "--port", str(port),
                          "-t", "1", "-c", "1024", "-np", "1"] + args,
                         stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % port
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return p, url
        except OSError:
            pass
        time.sleep(0.2)
    p.kill()
    print("FAIL: llama-server did not start: " + open(log.name).read()[-2000:], file=sys.stderr)
    sys.exit(1)


def cli(args, env_add=None):
    e = dict(os.environ, LANGUAGE="C", LC_ALL="C", XDG_RUNTIME_DIR=no_bus)
    # No keyring: GDBus would find a session bus through any of these.
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
        e.pop(name, None)
    e.update(env_add or {})
    r = subprocess.run([CLI] + args, capture_output=True, text=True, env=e, timeout=120,
                       errors="replace")
    return r.returncode, r.stdout, r.stderr


def field(err, name):
    line = [l for l in err.splitlines() if l.startswith("[prompt ")]
    if not line:
        return None
    for part in line[-1].strip("[]").split(" | "):
        words = part.replace(",", "").split()
        if words[0] == name or words[0] == name + ":":
            return words[1]
    return None


SYSTEM = "You are a careful assistant. " * 8
p, url = start([])
rc, out, err = cli(["run", "--remote", url, "-s", SYSTEM, "-p", "Hello there.", "-n", "8"])
check(rc == 0 and out and field(err, "timings") == "llama-server",
      "a streamed answer with llama-server's timings: rc %d %r %r" % (rc, out, err[-400:]))
check(field(err, "cached") is not None and field(err, "cached") == "0",
      "nothing cached on the first request: %r" % err[-300:])
# The same system prompt again: llama-server's prompt cache reuses it.
rc, out, err = cli(["run", "--remote", url, "-s", SYSTEM, "-p", "And again.", "-n", "8"])
cached = int(field(err, "cached") or -1)
check(rc == 0 and cached > 20,
      "the pinned system prompt comes back as cached tokens: %d %r" % (cached, err[-300:]))
rc, out, err = cli(["run", "--remote", url, "--list-models"])
check(rc == 0 and out.strip(), "--list-models: %r %r" % (out, err))
p.terminate()
p.wait()

p, url = start(["--api-key", "sesame"])
rc, out, err = cli(["run", "--remote", url, "-m", "x", "-p", "hi", "-n", "4"])
check(rc == 2 and "refused the API key" in err, "no key: %r" % err)
rc, out, err = cli(["run", "--remote", url, "-m", "x", "-p", "hi", "-n", "4",
                    "--api-key-env", "K"], {"K": "wrong"})
check(rc == 2 and "refused the API key" in err, "wrong key: %r" % err)
rc, out, err = cli(["run", "--remote", url, "-p", "hi", "-n", "4", "--api-key-env", "K"],
                   {"K": "sesame"})
check(rc == 0 and "[prompt " in err, "right key: %r" % err[-300:])
# llama-server serves one model and may answer any id; either an answer or
# the clear sentence, never anything else.
rc, out, err = cli(["run", "--remote", url, "-m", "no-such-model", "-p", "hi", "-n", "4",
                    "--api-key-env", "K"], {"K": "sesame"})
check(rc == 0 or "has no model 'no-such-model'" in err, "unknown model: rc %d %r" % (rc, err))
p.terminate()
p.wait()

# The server killed in the middle of an answer: a clear sentence, exit 2,
# and the text streamed so far stays on stdout. A tiny model may finish a
# short answer before the kill lands, so the kill follows the first byte of
# a long answer, and a few tries are allowed; one must be cut.
cut = None
for attempt in range(4):
    p, url = start([])
    e = dict(os.environ, LANGUAGE="C", LC_ALL="C", XDG_RUNTIME_DIR=no_bus)
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
        e.pop(name, None)
    c = subprocess.Popen([CLI, "run", "--remote", url, "-p", "Tell me a long story.",
                          "-n", "900"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    first = c.stdout.read(1)
    p.kill()
    p.wait()
    rest, err = c.communicate(timeout=60)
    out = (first + rest).decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    if c.returncode == 0:
        continue
    cut = (c.returncode, out, err)
    break
check(cut is not None, "the server was killed mid-answer in one of 4 tries")
if cut is not None:
    rc, out, err = cut
    check(rc == 2 and len(out) > 0 and "in the middle of the answer" in err
          and "text so far is kept" in err,
          "killed mid-stream: rc %d, %d chars kept, %r" % (rc, len(out), err[-400:]))
checks.finish()
