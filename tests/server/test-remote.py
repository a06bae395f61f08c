"""tern-cli run --remote (cli/cmd-run-remote.c, manager/tern-remote.c)
against Tern's own server and against a hostile stand-in.

Tern's server: greedy output through the server equals the local `run` on
the same model; the pinned system prompt comes back as cached tokens on the
second request; the API key (right, wrong, missing), an unknown model,
--list-models, --json, an unreachable port and a bad URL.

The stand-in (http.server in this process) plays what real servers do and
what broken ones do: 429 with Retry-After, a connection dropped mid-answer,
bytes that are not JSON, an overlong line, deep nesting, invalid UTF-8, an
error event, llama-server's timings with reasoning_content, a plain JSON
answer, CRLF lines cut into single bytes, 500 with an HTML page. Every case
must end in a clear sentence, keep the text streamed so far, and never
crash (the binary runs under AddressSanitizer)."""

import base64
import hashlib
import http.server
import json
import os
import re
import shlex
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

CLI = serverlib.env("TERN_CLI")
checks = serverlib.Checks()
check = checks.check


def cli(args, env_add=None, timeout=120, stdin=None):
    e = dict(os.environ)
    e["LANGUAGE"] = "C"
    e["LC_ALL"] = "C"
    # No keyring in a test: a stored key must neither leak in nor be
    # written to the keyring of whoever runs the tests (GDBus finds a
    # session bus through all three).
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
        e.pop(name, None)
    e["XDG_RUNTIME_DIR"] = NO_BUS_DIR
    e.update(env_add or {})
    r = subprocess.run([CLI] + args, capture_output=True, text=True, env=e, timeout=timeout,
                       input=stdin, errors="replace")
    return r.returncode, r.stdout, r.stderr


def stats_of(err):
    """The fields of the last stats line: {"prompt": 12, "cached": 4, ...}."""
    line = [l for l in err.splitlines() if l.startswith("[prompt ")]
    if not line:
        return None
    f = {}
    for part in line[-1].strip("[]").split(" | "):
        words = part.replace(",", "").split()
        if words[0] == "prompt":
            f["prompt"] = int(words[1])
            f["prefill"] = float(words[4])
        elif words[0] == "generated":
            f["generated"] = int(words[1])
            f["decode"] = float(words[4])
        elif words[0] in ("cached", "TTFT"):
            f[words[0].lower()] = float(words[1])
        elif words[0] in ("stop:", "timings:"):
            f[words[0][:-1]] = " ".join(words[1:])
    return f


# ------------------------------------------------------------ Tern's server

tmp = serverlib.workdir("remote")
NO_BUS_DIR = os.path.join(tmp, "no-bus")
os.makedirs(NO_BUS_DIR, mode=0o700, exist_ok=True)
model = serverlib.make_model(tmp)
SYSTEM = "You are a terse assistant who answers in one line."
PROMPT = "Name three colours."

rc, local_out, local_err = cli(["run", "-m", model, "-s", SYSTEM, "-p", PROMPT, "-n", "24",
                                "-t", "1"])
check(rc == 0 and local_out, "local run: rc %d: %s" % (rc, local_err[-400:]))

srv = serverlib.Server(tmp, "serve", model)
rc, out, err = cli(["run", "--remote", srv.url, "-s", SYSTEM, "-p", PROMPT, "-n", "24"])
check(rc == 0, "remote run against tern serve: rc %d: %s" % (rc, err[-400:]))
check(out == local_out,
      "greedy remote output equals the local run:\nlocal  %r\nremote %r" % (local_out, out))
st = stats_of(err)
check(st is not None and st.get("timings") == "tern",
      "the stats line takes Tern's timings: %r" % err[-300:])
check(st and st["prompt"] > 0 and st["generated"] > 0 and st["decode"] > 0,
      "prompt and generated tokens are reported: %r" % (st,))

# The same system prompt again: the server restores its pin.
rc, out2, err2 = cli(["run", "--remote", srv.url + "/v1/", "-s", SYSTEM, "-p", "And two more.",
                      "-n", "8"])
st2 = stats_of(err2)
check(rc == 0 and st2 and st2.get("cached", 0) > 0,
      "the second request reports the pinned prefix as cached: %r" % err2[-300:])

rc, out, err = cli(["run", "--remote", srv.url, "--list-models"])
check(rc == 0 and len(out.split()) == 1, "--list-models: %r %r" % (out, err))
model_id = out.strip()

rc, out, err = cli(["run", "--remote", srv.url, "-m", model_id, "-s", SYSTEM, "-p", PROMPT,
                    "-n", "24", "--json"])
try:
    doc = json.loads(out)
except ValueError:
    doc = None
check(rc == 0 and doc and doc["text"] == local_out and doc["stats"]["timings"] == "tern"
      and doc["stats"]["generated_tokens"] > 0,
      "--json: %r %r" % (out[:300], err[-300:]))

rc, out, err = cli(["run", "--remote", srv.url, "-m", "no-such-model", "-p", PROMPT])
check(rc == 2 and "has no model 'no-such-model'" in err, "unknown model: rc %d %r" % (rc, err))

# A multi-turn chat on stdin keeps the conversation.
rc, out, err = cli(["run", "--remote", srv.url, "-s", SYSTEM, "-n", "6"],
                   stdin="Hello.\nAgain.\n")
check(rc == 0 and err.count("[prompt ") == 2, "chat on stdin: two answers: %r" % err[-400:])
turns = [stats_of(l) for l in err.splitlines() if l.startswith("[prompt ")]
check(len(turns) == 2 and turns[1]["prompt"] > turns[0]["prompt"],
      "the second turn sends the first one too: %r" % (turns,))
srv.stop()

keyed = serverlib.Server(tmp, "keyed", model, ["--api-key", "sesame-42"])
rc, out, err = cli(["run", "--remote", keyed.url, "-m", model_id, "-p", PROMPT, "-n", "4"])
check(rc == 2 and "refused the API key" in err and "401" in err, "no key: rc %d %r" % (rc, err))
rc, out, err = cli(["run", "--remote", keyed.url, "-m", model_id, "-p", PROMPT, "-n", "4",
                    "--api-key-env", "TEST_KEY"], {"TEST_KEY": "wrong"})
check(rc == 2 and "refused the API key" in err, "wrong key: rc %d %r" % (rc, err))
rc, out, err = cli(["run", "--remote", keyed.url, "-m", model_id, "-p", PROMPT, "-n", "4",
                    "--api-key-env", "TEST_KEY"], {"TEST_KEY": "sesame-42"})
check(rc == 0 and "[prompt " in err, "right key: rc %d %r" % (rc, err[-300:]))
rc, out, err = cli(["run", "--remote", keyed.url, "--api-key-env", "UNSET_KEY_VAR", "-p", "x"])
check(rc == 1 and "UNSET_KEY_VAR" in err, "unset key variable: rc %d %r" % (rc, err))
keyed.stop()

# Nobody listens on a port just closed.
s = socket.socket()
s.bind(("127.0.0.1", 0))
dead_port = s.getsockname()[1]
s.close()
rc, out, err = cli(["run", "--remote", "http://127.0.0.1:%d" % dead_port, "-m", "x", "-p", "hi"])
check(rc == 2 and "cannot reach" in err, "unreachable: rc %d %r" % (rc, err))
for bad in ["ftp://host/v1", "not a url", "http://", "http://host/v1?x=1"]:
    rc, out, err = cli(["run", "--remote", bad, "-m", "x", "-p", "hi"])
    check(rc == 1 and "is not a server address" in err, "bad URL %r: rc %d %r" % (bad, rc, err))
rc, out, err = cli(["run", "--remote", "http://127.0.0.1:1", "--spec", "lookup", "-p", "hi"])
check(rc == 1 and "setting of the server" in err, "--spec with --remote: %r" % err)


# ------------------------------------------------------- a hostile stand-in

HOSTILE = "a\x1b]52;c;SGVsbG8=\x07b\x1b[2Jc\rd"
HOSTILE_THINK = "t\x1b]0;owned\x07\x08"
HOSTILE_AFTER = "\u009b2J\u00fc\r\n\x7fend"

def chunk(delta=None, finish=None, **extra):
    d = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    d.update(extra)
    return "data: " + json.dumps(d) + "\n\n"


class Fake(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/json", headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def stream_head(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def w(self, text):
        self.wfile.write(text.encode() if isinstance(text, str) else text)
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/v1/models":
            self.send(200, json.dumps({"object": "list", "data": [
                {"id": "m-ok", "object": "model"}, {"id": "m-429", "object": "model"}]}))
        else:
            self.send(404, "{}")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n))
        m = req.get("model")
        if self.headers.get("Authorization") != "Bearer k":
            return self.send(401, json.dumps({"error": {"message": "Invalid API Key",
                                                        "type": "authentication_error"}}))
        if m == "m-ok":
            first = req["messages"][0]
            self.stream_head()
            self.w(chunk({"role": "assistant", "content": ""}))
            self.w(chunk({"content": "first=" + first["role"]}))
            self.w(chunk({"content": " ok"}, "stop"))
            self.w(chunk(None, None, usage={"prompt_tokens": 30, "completion_tokens": 2,
                                            "prompt_tokens_details": {"cached_tokens": 20}}))
            self.w("data: [DONE]\n\n")
        elif m == "m-images":
            # What the request carried: the user message's parts, each image's
            # MIME type and the sha256 of its decoded bytes.
            parts = []
            for msg in req["messages"]:
                c = msg["content"]
                if isinstance(c, str):
                    parts.append("%s:text" % msg["role"])
                    continue
                for part in c:
                    if part["type"] == "text":
                        parts.append("%s:text=%s" % (msg["role"], part["text"]))
                    else:
                        url = part["image_url"]["url"]
                        head, b64 = url.split(",", 1)
                        parts.append("%s:%s:%s" % (msg["role"], head, hashlib.sha256(
                            base64.b64decode(b64)).hexdigest()))
            self.stream_head()
            self.w(chunk({"content": " ".join(parts)}, "stop"))
            self.w("data: [DONE]\n\n")
        elif m == "m-429":
            self.send(429, json.dumps({"error": {"message": "Too many requests"}}),
                      headers=[("Retry-After", "7")])
        elif m == "m-429-date":
            self.send(429, "{}", headers=[("Retry-After", "Wed, 21 Oct 2037 07:28:00 GMT")])
        elif m == "m-drop":
            self.stream_head()
            self.w(chunk({"content": "partial "}))
            self.w(chunk({"content": "text"}))
            self.w('data: {"choices": [{"delta": {"content": "cut')
            self.connection.shutdown(socket.SHUT_RDWR)
        elif m == "m-garbage":
            self.stream_head()
            self.w(chunk({"content": "kept"}))
            self.w("data: {this is not json\n\n")
            self.w(chunk({"content": "never"}, "stop"))
        elif m == "m-huge":
            self.stream_head()
            self.w(chunk({"content": "before"}))
            try:
                self.w("data: " + "x" * (3 << 20))
            except OSError:
                pass
        elif m == "m-deep":
            self.stream_head()
            self.w("data: " + "[" * 100000 + "]" * 100000 + "\n\n")
        elif m == "m-badutf8":
            self.stream_head()
            self.w(b'data: {"choices":[{"delta":{"content":"\xff\xfe"}}]}\n\n')
        elif m == "m-error-event":
            self.stream_head()
            self.w(chunk({"content": "some"}))
            self.w('data: {"error": {"message": "the engine ran out of memory\\u0007"}}\n\n')
        elif m == "m-types":
            # Every member of the wrong type: ignored, nothing printed.
            self.stream_head()
            self.w('data: {"choices": 5}\n\n')
            self.w('data: {"choices": [7, {"delta": 1}]}\n\n')
            self.w('data: {"choices": [{"delta": {"content": 12, "reasoning_content": []}}]}\n\n')
            self.w('data: {"usage": {"prompt_tokens": "many", "completion_tokens": -3}}\n\n')
            self.w('data: {"timings": {"prompt_n": "x", "predicted_ms": 0}}\n\n')
            self.w(": a comment\nevent: message\nid: 3\nretry: 10\n\n")
            self.w(chunk({"content": "fine"}, "length"))
            self.w("data: [DONE]\n\n")
        elif m == "m-llama":
            # llama-server: reasoning_content, then timings with cache_n.
            self.stream_head()
            self.w(chunk({"reasoning_content": "let me think"}))
            self.w(chunk({"content": "answer"}))
            self.w(chunk({}, "stop", timings={
                "cache_n": 40, "prompt_n": 10, "prompt_ms": 20.0, "predicted_n": 50,
                "predicted_ms": 500.0}))
            self.w("data: [DONE]\n\n")
        elif m == "m-plain-json":
            self.send(200, json.dumps({"choices": [{"index": 0, "message": {
                "role": "assistant", "content": "whole answer"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2}}))
        elif m == "m-crlf":
            self.stream_head()
            body = ("data: " + json.dumps({"choices": [{"delta": {"content": "über"}}]})
                    + "\r\n\r\n" + "data: " + json.dumps({"choices": [{"delta": {},
                                                                       "finish_reason": "stop"}]})
                    + "\r\n\r\ndata: [DONE]\r\n\r\n").encode()
            for i in range(len(body)):
                self.w(body[i:i + 1])
        elif m == "m-html":
            self.send(200, "<html><body>Welcome to nginx!</body></html>", "text/html")
        elif m == "m-500":
            self.send(500, "<html><body>Internal\nServer Error</body></html>", "text/html")
        elif m == "m-502":
            # nginx's own page, as a proxy in front of a stopped server sends it.
            self.send(502, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                      "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1"
                      "</center>\r\n</body>\r\n</html>\r\n", "text/html")
        elif m == "m-json-list":
            # 200 and JSON, but a model list: not an answer (an empty one).
            self.send(200, json.dumps({"object": "list", "data": [{"id": "m-ok"}]}))
        elif m == "m-esc":
            # Terminal sequences in the answer, one byte an event: OSC 52
            # (the clipboard), an erase of the screen, a lone CR.
            self.stream_head()
            for c in HOSTILE:
                self.w(chunk({"content": c}))
            self.w(chunk({}, "stop"))
            self.w("data: [DONE]\n\n")
        elif m == "m-esc-think":
            # The same in the thinking; a C1 CSI, a CR LF and a character
            # of two bytes in the answer.
            self.stream_head()
            for c in HOSTILE_THINK:
                self.w(chunk({"reasoning_content": c}))
            for c in HOSTILE_AFTER:
                self.w(chunk({"content": c}))
            self.w(chunk({}, "stop"))
            self.w("data: [DONE]\n\n")
        elif m == "m-eof":
            self.stream_head()
            self.w(chunk({"content": "no end"}))
        else:
            self.send(404, json.dumps({"error": {"message": "The model `%s` does not exist." % m,
                                                 "type": "NotFoundError", "code": 404}}))


class ThreadedServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


fake = ThreadedServer(("127.0.0.1", 0), Fake)
threading.Thread(target=fake.serve_forever, daemon=True).start()
URL = "http://127.0.0.1:%d/v1" % fake.server_address[1]
KEY = {"K": "k"}


def fake_run(model_id, *more, env=KEY):
    return cli(["run", "--remote", URL, "-m", model_id, "-s", "pin", "-p", "hi",
                "--api-key-env", "K"] + list(more), env)


rc, out, err = fake_run("m-ok")
st = stats_of(err)
check(rc == 0 and out == "first=system ok", "the system prompt is the first message: %r" % out)
check(st and st["cached"] == 20 and st["prompt"] == 30 and st["generated"] == 2
      and st["timings"] == "client", "usage and cached tokens: %r" % err)
rc, out, err = fake_run("m-ok", env={"K": "nope"})
check(rc == 2 and "refused the API key (HTTP 401 (Invalid API Key))" in err, "401: %r" % err)
rc, out, err = fake_run("m-429")
check(rc == 2 and "busy (HTTP 429" in err and "wait 7 seconds" in err, "429: %r" % err)
rc, out, err = fake_run("m-429-date")
check(rc == 2 and "until Wed, 21 Oct 2037 07:28:00 GMT" in err, "429 with a date: %r" % err)
rc, out, err = fake_run("m-drop")
check(rc == 2 and out.startswith("partial text") and "in the middle of the answer" in err
      and "text so far is kept" in err, "disconnect mid-stream: %r %r" % (out, err))
rc, out, err = fake_run("m-garbage")
check(rc == 2 and out.startswith("kept") and "never" not in out
      and "not a JSON object" in err, "garbage event: %r %r" % (out, err))
rc, out, err = fake_run("m-huge")
check(rc == 2 and out.startswith("before") and "longer than" in err, "huge line: %r" % err[-300:])
rc, out, err = fake_run("m-deep")
check(rc == 2 and "not a JSON object" in err, "deep nesting: %r" % err[-300:])
rc, out, err = fake_run("m-badutf8")
check(rc == 2 and "not UTF-8" in err, "invalid UTF-8: %r" % err[-300:])
rc, out, err = fake_run("m-error-event")
check(rc == 2 and out.startswith("some") and "the engine ran out of memory" in err
      and "\a" not in err, "error event: %r" % err)
rc, out, err = fake_run("m-types")
st = stats_of(err)
check(rc == 0 and out == "fine" and st and st["stop"] == "limit", "wrong types: %r %r" % (out, err))
rc, out, err = fake_run("m-llama")
st = stats_of(err)
check(rc == 0 and out == "<think>\nlet me think\n</think>\n\nanswer", "reasoning apart: %r" % out)
check(st and st["timings"] == "llama-server" and st["cached"] == 40 and st["prompt"] == 50
      and abs(st["prefill"] - 500.0) < 0.5 and abs(st["decode"] - 100.0) < 0.5,
      "llama-server timings: %r" % err)
rc, out, err = fake_run("m-llama", "--json")
doc = json.loads(out) if rc == 0 else None
check(doc and doc["text"] == "answer" and doc["reasoning"] == "let me think"
      and doc["stats"]["cached_tokens"] == 40, "--json with reasoning: %r" % out)
rc, out, err = fake_run("m-plain-json")
check(rc == 0 and out == "whole answer", "a plain JSON answer: %r %r" % (out, err))
rc, out, err = fake_run("m-crlf")
check(rc == 0 and out == "über", "CRLF cut into bytes: %r %r" % (out, err))
rc, out, err = fake_run("m-500")
# An HTML page's text, not its markup, goes into the sentence.
check(rc == 2 and "answered HTTP 500 (Internal Server Error)" in err, "500: %r" % err)
rc, out, err = fake_run("m-502")
check(rc == 2 and "answered HTTP 502 (502 Bad Gateway 502 Bad Gateway nginx/1.22.1)" in err,
      "502 from nginx: %r" % err)
rc, out, err = fake_run("m-html")
check(rc == 2 and "answered with text/html, not an event stream" in err, "an HTML page: %r" % err)
rc, out, err = fake_run("m-eof")
check(rc == 2 and out.rstrip("\n") == "no end" and "closed the connection in the middle" in err,
      "end without [DONE]: %r" % err)
# A chat whose standard input cannot be read (a folder): an error, as in a
# local run, not the end of the conversation with status 0.
fd = os.open(tmp, os.O_RDONLY)
r = subprocess.run([CLI, "run", "--remote", URL, "-m", "m-ok", "--api-key-env", "K"], stdin=fd,
                   capture_output=True, text=True, env=dict(os.environ, LC_ALL="C", LANGUAGE="C",
                                                             K="k"), timeout=60)
os.close(fd)
check(r.returncode == 2 and "cannot read the standard input: Is a directory" in r.stderr,
      "chat on an unreadable standard input: rc %d %r" % (r.returncode, r.stderr))
rc, out, err = fake_run("m-json-list")
check(rc == 2 and "answered with JSON that is not a chat completion" in err,
      "200 with JSON that has no choices: rc %d %r %r" % (rc, out, err))


def raw_run(args, terminal):
    """tern-cli's bytes: its stdout on a pipe, or (terminal) all that a
    terminal gets from it, script(1)'s pseudo-terminal on both stdout and
    stderr. TERM=dumb: tern-cli then writes no sequence of its own."""
    e = dict(os.environ, LANGUAGE="C", LC_ALL="C", XDG_RUNTIME_DIR=NO_BUS_DIR, TERM="dumb", **KEY)
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"):
        e.pop(name, None)
    argv = [CLI] + args
    if terminal:
        argv = ["script", "-qec", " ".join(shlex.quote(a) for a in argv), "/dev/null"]
    r = subprocess.run(argv, capture_output=True, env=e, timeout=120, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def on_screen(out):
    """What script(1) recorded, each line's end as a newline: the
    pseudo-terminal writes a newline as CR LF (and a CR LF as CR CR LF),
    which only ends a line; None when a byte would drive the terminal (a
    control but newline and tab, a CR that no LF follows, DEL, C1 CSI)."""
    text = re.sub(b"\r+\n", b"\n", out)
    bad = [c for c in text if (c < 0x20 and c not in (0x0a, 0x09)) or c == 0x7f]
    return None if bad or b"\xc2\x9b" in text else text


# The answer's text never drives the terminal (docs/REMOTE.md): a hostile
# server's escape sequences, streamed one byte an event, show escaped on a
# terminal; a pipe gets them exactly as sent.
esc_args = ["run", "--remote", URL, "-p", "hi", "--api-key-env", "K", "-m"]
rc, out, err = raw_run(esc_args + ["m-esc"], False)
check(rc == 0 and out == HOSTILE.encode(), "to a pipe the answer is exact: %r %r" % (out, err))
rc, out, err = raw_run(esc_args + ["m-esc-think"], False)
check(rc == 0 and out == ("<think>\n" + HOSTILE_THINK + "\n</think>\n\n" + HOSTILE_AFTER).encode(),
      "to a pipe the thinking and the answer are exact: %r" % out)
if shutil.which("script"):
    rc, out, err = raw_run(esc_args + ["m-esc"], True)
    text = on_screen(out)
    check(rc == 0 and text and b"a\\x1b]52;c;SGVsbG8=\\x07b\\x1b[2Jc\\x0dd\n[prompt " in text,
          "on a terminal the sequences show escaped: rc %d %r" % (rc, out))
    rc, out, err = raw_run(esc_args + ["m-esc-think"], True)
    text = on_screen(out)
    check(rc == 0 and text and ("<think>\nt\\x1b]0;owned\\x07\\x08\n</think>\n\n"
                                "\\u009b2J\u00fc\n\\x7fend\n[prompt ").encode() in text,
          "on a terminal the thinking too; CR LF and \u00fc stay: rc %d %r" % (rc, out))
    # --json on a terminal: valid JSON with the text exact, and nothing in
    # it that a terminal obeys (a C1 control as \u009b, not raw).
    rc, out, err = raw_run(esc_args + ["m-esc-think", "--json"], True)
    text = on_screen(out)
    doc = None
    try:
        doc = json.loads(text.decode())
    except (ValueError, AttributeError):
        pass
    check(rc == 0 and doc and doc["text"] == HOSTILE_AFTER and doc["reasoning"] == HOSTILE_THINK,
          "--json on a terminal: rc %d %r" % (rc, out))
else:
    print("script(1) is missing: the terminal cases are not checked")
# Images (--image): the file's own bytes in a data: URL before the text,
# with the type its magic bytes name, whatever the file's name says.
png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
                    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082")
jpeg_named_png = b"\xff\xd8\xff\xe0" + b"\x00" * 60
img_dir = serverlib.workdir("remote-images")
with open(os.path.join(img_dir, "a.png"), "wb") as f:
    f.write(png)
with open(os.path.join(img_dir, "b.png"), "wb") as f:
    f.write(jpeg_named_png)
rc, out, err = fake_run("m-images", "--image", os.path.join(img_dir, "a.png"),
                        "--image", os.path.join(img_dir, "b.png"))
check(rc == 0 and out == "system:text user:data:image/png;base64:%s "
      "user:data:image/jpeg;base64:%s user:text=hi" % (hashlib.sha256(png).hexdigest(),
                                                       hashlib.sha256(jpeg_named_png).hexdigest()),
      "two images before the text, typed by their bytes: %r %r" % (out, err))
# Refused before anything is sent: not an image, a FIFO (which would block
# a reader forever), a folder, a missing file, a file over 20 MiB.
with open(os.path.join(img_dir, "svg.png"), "w") as f:
    f.write("<svg xmlns='http://www.w3.org/2000/svg'/>")
os.mkfifo(os.path.join(img_dir, "fifo.png"))
with open(os.path.join(img_dir, "big.png"), "wb") as f:
    f.write(png)
    f.truncate(21 << 20)
for name, words in (("svg.png", "not a PNG, JPEG, GIF or WebP image"),
                    ("fifo.png", "not a regular file"), ("", "not a regular file"),
                    ("none.png", "No such file"), ("big.png", "larger than 20 MiB")):
    rc, out, err = fake_run("m-images", "--image", os.path.join(img_dir, name))
    check(rc == 2 and out == "" and words in err, "--image %s refused: rc %d %r" % (name, rc, err))
rc, out, err = fake_run("m-images", *(["--image", os.path.join(img_dir, "a.png")] * 9))
check(rc == 1 and "at most 8 images" in err, "nine images: %r" % err)
rc, out, err = fake_run("gpt-nonexistent")
check(rc == 2 and "has no model 'gpt-nonexistent' (The model `gpt-nonexistent` does not exist.)"
      in err, "unknown model (vLLM's 404): %r" % err)
rc, out, err = cli(["run", "--remote", URL, "-p", "hi", "--api-key-env", "K"], KEY)
check(rc == 1 and "serves 2 models" in err, "two models and no -m: %r" % err)
rc, out, err = cli(["run", "--remote", URL, "--list-models", "--api-key-env", "K"], KEY)
check(rc == 0 and out.split() == ["m-ok", "m-429"], "--list-models: %r" % out)
# No Secret Service here: storing the key fails in words, and says what to do.
rc, out, err = cli(["run", "--remote", URL, "--list-models", "--api-key-env", "K", "--store-key"],
                   KEY)
check(rc == 2 and ("system keyring is not available" in err or "without the system keyring" in err)
      and "environment variable" in err, "--store-key without a keyring: rc %d %r" % (rc, err))
rc, out, err = cli(["run", "--remote", URL, "--store-key", "-p", "x"])
check(rc == 1 and "--api-key-env" in err, "--store-key without a key: %r" % err)

# A redirect to another host is not followed: libsoup would turn a 302 POST
# into a GET without the body, and the prompt and the key belong to the
# address given. The sentence names where it points.
elsewhere_hits = []


class Elsewhere(Fake):
    def do_GET(self):
        elsewhere_hits.append(("GET", self.path, self.headers.get("Authorization")))
        Fake.do_GET(self)

    def do_POST(self):
        elsewhere_hits.append(("POST", self.path, self.headers.get("Authorization")))
        Fake.do_POST(self)


elsewhere = ThreadedServer(("127.0.0.1", 0), Elsewhere)
threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
ELSEWHERE = "http://127.0.0.1:%d" % elsewhere.server_address[1]


class Redirect(Fake):
    def go(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        code = int(self.path.split("/")[1])
        where = ELSEWHERE + "/" + "/".join(self.path.split("/")[2:])
        self.send(code, "", "text/plain", [("Location", where)] if code != 300 else [])

    do_GET = go
    do_POST = go


redirect = ThreadedServer(("127.0.0.1", 0), Redirect)
threading.Thread(target=redirect.serve_forever, daemon=True).start()
for code in (301, 302, 303, 307, 308):
    base = "http://127.0.0.1:%d/%d/v1" % (redirect.server_address[1], code)
    rc, out, err = cli(["run", "--remote", base, "-m", "m-ok", "-p", "hi", "--api-key-env", "K"],
                       KEY)
    check(rc == 2 and out == "" and "redirects to %s/v1/chat/completions (HTTP %d)"
          % (ELSEWHERE, code) in err, "chat redirected with %d: rc %d %r %r" % (code, rc, out, err))
    rc, out, err = cli(["run", "--remote", base, "--list-models", "--api-key-env", "K"], KEY)
    check(rc == 2 and out == "" and "redirects to %s/v1/models (HTTP %d)" % (ELSEWHERE, code)
          in err, "model list redirected with %d: rc %d %r %r" % (code, rc, out, err))
rc, out, err = cli(["run", "--remote", "http://127.0.0.1:%d/300/v1" % redirect.server_address[1],
                    "-m", "m-ok", "-p", "hi"])
check(rc == 2 and "answered HTTP 300, a redirect without a Location" in err,
      "a redirect without a Location: rc %d %r" % (rc, err))
check(elsewhere_hits == [], "nothing reached the other host: %r" % elsewhere_hits)
redirect.shutdown()
elsewhere.shutdown()

# Model ids are printed (--list-models, "MODEL on URL"): one with a control
# character (a terminal escape that would clear or retitle the terminal), a
# bidi control (U+202E shows the line backwards) or an invisible character
# (U+200B: "m-fine" and "m-f\u200bine" look the same) is no model id and is
# left out.
class EscIds(Fake):
    def do_GET(self):
        self.send(200, json.dumps({"object": "list", "data": [
            {"id": "m-\x1b[2Jclear"}, {"id": "m-\x1b]0;title\x07"}, {"id": "m-\u009b31m"},
            {"id": "m-\u202eenif"}, {"id": "m-f\u200bine"}, {"id": "m-fine"}]}))


esc = ThreadedServer(("127.0.0.1", 0), EscIds)
threading.Thread(target=esc.serve_forever, daemon=True).start()
ESC_URL = "http://127.0.0.1:%d/v1" % esc.server_address[1]
rc, out, err = cli(["run", "--remote", ESC_URL, "--list-models"])
check(rc == 0 and out == "m-fine\n", "ids with control characters left out: rc %d %r" % (rc, out))
rc, out, err = cli(["run", "--remote", ESC_URL, "--api-key-env", "K"], KEY, stdin="")
check(rc == 0 and "\x1b" not in err and err.startswith("m-fine on "),
      "the one usable id is the model: rc %d %r" % (rc, err))
esc.shutdown()

# A password in the address (a proxy with Basic authentication) is used,
# but no message shows it: they go to terminals, logs and bug reports.
class BasicAuth(Fake):
    def do_GET(self):
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(
                b"alice:s3cret").decode():
            return self.send(401, "{}", headers=[("WWW-Authenticate", 'Basic realm="tern"')])
        Fake.do_GET(self)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send(500, json.dumps({"error": {"message": "the engine is down"}}))


basic = ThreadedServer(("127.0.0.1", 0), BasicAuth)
threading.Thread(target=basic.serve_forever, daemon=True).start()
with_password = "http://alice:s3cret@127.0.0.1:%d" % basic.server_address[1]
rc, out, err = cli(["run", "--remote", with_password, "--list-models"])
check(rc == 0 and out.split() == ["m-ok", "m-429"], "Basic authentication from the URL: %r" % err)
rc, out, err = cli(["run", "--remote", with_password, "-m", "m-ok", "-p", "hi"])
check(rc == 2 and "the engine is down" in err and "s3cret" not in err
      and "alice@127.0.0.1:%d/v1" % basic.server_address[1] in err,
      "an error names the address without its password: %r" % err)
rc, out, err = cli(["run", "--remote", "http://alice:s3cret@127.0.0.1:%d" % dead_port, "-m", "x",
                    "-p", "hi"])
check(rc == 2 and "cannot reach" in err and "s3cret" not in err,
      "unreachable, without the password: %r" % err)
rc, out, err = cli(["run", "--remote", with_password, "--api-key-env", "K"], KEY, stdin="")
check("s3cret" not in err and "serves 2 models" in err, "serves N models, without the password: %r"
      % err)
basic.shutdown()

# A server that goes silent: before its answer, and in the middle of it.
# TERN_REMOTE_TIMEOUT (seconds; default 600) bounds each wait; the
# sentence says what happened, not "cannot reach".
class Silent(Fake):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "mid" in self.path:
            self.stream_head()
            self.w(chunk({"content": "so far"}))
        time.sleep(8)


silent = ThreadedServer(("127.0.0.1", 0), Silent)
threading.Thread(target=silent.serve_forever, daemon=True).start()
for where, words in (("before", "did not answer within 2 seconds"),
                     ("mid", "sent nothing for 2 seconds in the middle of the answer")):
    t0 = time.monotonic()
    try:
        rc, out, err = cli(["run", "--remote", "http://127.0.0.1:%d/%s/v1"
                            % (silent.server_address[1], where), "-m", "m", "-p", "hi"],
                           {"TERN_REMOTE_TIMEOUT": "2"}, timeout=20)
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", "still waiting after 20 s"
    took = time.monotonic() - t0
    check(rc == 2 and words in err and "cannot reach" not in err and took < 15
          and (where == "before" or out.startswith("so far")),
          "silent %s the answer: rc %s in %.1f s %r %r" % (where, rc, took, out, err))
for bad in ("0", "ten", "-5", "99999999999"):
    rc, out, err = cli(["run", "--remote", URL, "-m", "m", "-p", "hi"],
                       {"TERN_REMOTE_TIMEOUT": bad})
    check(rc == 1 and "TERN_REMOTE_TIMEOUT=%s is not" % bad in err,
          "TERN_REMOTE_TIMEOUT=%s refused: rc %d %r" % (bad, rc, err))
silent.shutdown()

# Ctrl-C during a slow answer: cancelled, the text so far printed.
class Slow(Fake):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.stream_head()
        try:
            for i in range(600):
                self.w(chunk({"content": "w%d " % i}))
                time.sleep(0.05)
        except OSError:
            pass


slow = ThreadedServer(("127.0.0.1", 0), Slow)
threading.Thread(target=slow.serve_forever, daemon=True).start()
p = subprocess.Popen([CLI, "run", "--remote", "http://127.0.0.1:%d" % slow.server_address[1],
                      "-m", "x", "-p", "hi"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     env=dict(os.environ, LANGUAGE="C", LC_ALL="C"))
time.sleep(3)
p.send_signal(2)
try:
    out, err = p.communicate(timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
# The one answer of -p stopped: 130, as a shell reports SIGINT (was 0).
check(p.returncode == 130 and out.startswith(b"w0 w1") and b"stop: cancelled" in err,
      "Ctrl-C cancels the stream: rc %s %r %r" % (p.returncode, out[-100:], err[-300:]))

fake.shutdown()
slow.shutdown()
checks.finish()
