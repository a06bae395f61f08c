"""tern-cli run --remote's own edges (cli/cmd-run-remote.c), against a
stand-in server in this process:

- an answer that cannot be written (standard output on /dev/full) fails
  with exit status 2 and a sentence that says why, as a local run does;
- --store-key keeps the key under the address without its password: the
  keyring item's attributes and label are stored in clear (docs/REMOTE.md).
  No Secret Service runs in a test: tern-cli-test-keyring (cli/meson.build),
  the first argument, writes every keyring call to $TERN_TEST_KEYRING_LOG
  instead.

Environment (tests/meson.build): TERN_CLI."""

import http.server
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading

CLI = os.environ["TERN_CLI"]
CLI_KEYRING = sys.argv[1] if len(sys.argv) > 1 else ""
failures = []


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name + ("" if ok else "\n" + detail))
    if not ok:
        failures.append(name)


def chunk(delta, finish=None):
    return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m",
                                  "choices": [{"index": 0, "delta": delta,
                                               "finish_reason": finish}]}) + "\n\n"


class Stand(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            # More than stdio's buffer, so that a write fails mid-answer.
            for i in range(64):
                self.wfile.write(chunk({"content": "word%d " % i + "x" * 200}).encode())
                self.wfile.flush()
            self.wfile.write((chunk({}, "stop") + "data: [DONE]\n\n").encode())
        except OSError:
            pass  # the client stopped reading


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Stand)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = "http://127.0.0.1:%d/v1" % server.server_address[1]
tmp = tempfile.mkdtemp()


def env_of(**more):
    e = dict(os.environ, LANGUAGE="C", LC_ALL="C")
    # Never the keyring of whoever runs the tests.
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
        e.pop(name, None)
    e["XDG_RUNTIME_DIR"] = os.path.join(tmp, "no-bus")
    e.update(more)
    return e


# ------------------------------------------------ an answer that goes nowhere

if os.path.exists("/dev/full"):
    for mode in (["-p", "hi"], []):
        with open("/dev/full", "w") as full:
            r = subprocess.run([CLI, "run", "--remote", URL] + mode, stdout=full,
                               stderr=subprocess.PIPE, input="hi\n", text=True, env=env_of(),
                               timeout=120)
        name = "one prompt" if mode else "a chat"
        check("%s to /dev/full: exit status 2" % name, r.returncode == 2,
              "exit %d, stderr: %s" % (r.returncode, r.stderr))
        check("%s to /dev/full: says the output could not be written" % name,
              "cannot write the standard output: No space left on device" in r.stderr
              and "[prompt " not in r.stderr, r.stderr)
else:
    print("note: no /dev/full; the failed write is not checked")

# ------------------------------------------------ the keyring's items

if not CLI_KEYRING:
    print("note: built without the model manager; the keyring is not checked")
else:
    password = "hunter2-pw"
    for given, kept in [
        ("http://alice:%s@127.0.0.1:9/v1" % password, "http://alice@127.0.0.1:9/v1"),
        # percent-encoded, and /v1 added: neither may bring the password back
        ("http://alice:%s%%40x@127.0.0.1:9" % password, "http://alice@127.0.0.1:9/v1"),
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    ]:
        log = os.path.join(tmp, "keyring.log")
        if os.path.exists(log):
            os.unlink(log)
        r = subprocess.run([CLI_KEYRING, "run", "--remote", given, "--api-key-env", "K",
                            "--store-key", "--list-models"], capture_output=True, text=True,
                           env=env_of(K="sk-key", TERN_TEST_KEYRING_LOG=log), timeout=120)
        calls = open(log).read() if os.path.exists(log) else ""
        stores = [l for l in calls.splitlines() if l.startswith("store ")]
        check("--store-key %s: one key stored" % given,
              len(stores) == 1 and "schema=io.github.tern.Tern.RemoteKey " in stores[0]
              and stores[0].endswith(" secret=sk-key"), calls + r.stderr)
        check("--store-key %s: kept under %s" % (given, kept),
              stores != [] and (" url=%s " % kept) in stores[0], calls)
        check("--store-key %s: no keyring call and no message holds the password" % given,
              password not in calls and password not in r.stderr, calls + r.stderr)
        if given != kept:
            check("--store-key %s: says the password is not stored" % given,
                  "the password in the address is not stored" in r.stderr, r.stderr)
        # No key given: looked up under the same address.
        os.unlink(log)
        subprocess.run([CLI_KEYRING, "run", "--remote", given, "--list-models"],
                       capture_output=True, text=True,
                       env=env_of(TERN_TEST_KEYRING_LOG=log), timeout=120)
        calls = open(log).read() if os.path.exists(log) else ""
        check("%s without a key: looked up under %s" % (given, kept),
              calls.startswith("lookup ") and (" url=%s " % kept) in calls
              and password not in calls, calls)

server.shutdown()
if failures:
    print("%d failed" % len(failures))
    sys.exit(1)
