"""tern-cli run --remote against llama.cpp's llama-server (docs/REMOTE.md).

The npm package @node-llama-cpp/linux-x64 that tools/llamacpp-compare.sh
installs ships libllama and ggml but no llama-server (and no libmtmd, which
the server needs), so this test takes the binary from $TERN_LLAMA_SERVER
(a llama.cpp build: build/bin/llama-server) and is skipped, with a message,
without it. It checks the streamed answer, llama-server's `timings` and
its prompt cache (cache_n) as the stats line shows them, the API key, and
a model id the server does not have."""

import os
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

binary = os.environ.get("TERN_LLAMA_SERVER", "")
if not binary or not os.access(binary, os.X_OK):
    print("skipped: set TERN_LLAMA_SERVER to a llama-server binary (llama.cpp's "
          "build/bin/llama-server); the npm package has none (docs/REMOTE.md)")
    sys.exit(77)

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
checks.finish()
