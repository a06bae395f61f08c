"""Helpers for the server tests: a tiny synthetic model, a `tern-cli serve`
on an ephemeral port of 127.0.0.1, HTTP requests with the standard library.

Environment (tests/meson.build): TERN_CLI, TERN_TEST_TMP, TERN_SOURCE_ROOT,
TERN_VOCAB_DIR."""

import atexit
import base64
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib


def cannot_run(why):
    """Skips (77), except in CI, where a test that cannot run fails."""
    print("cannot run: " + why)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)


def env(name):
    value = os.environ.get(name)
    if not value:
        print(name + " is not set (run through meson test)")
        sys.exit(1)
    return value


class Checks:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, ok, what):
        self.n += 1
        if not ok:
            self.failed += 1
            print("FAIL: " + what, file=sys.stderr, flush=True)
        return ok

    def finish(self):
        print("%d checks, %d failed" % (self.n, self.failed))
        sys.exit(1 if self.failed else 0)


def workdir(name):
    base = os.environ.get("TERN_TEST_TMP") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=name + ".", dir=base)


def make_model(tmp, name="tiny", vocab=None, arch="llama", extra=()):
    """A random-weight model small enough for hundreds of requests under
    AddressSanitizer; vocab: a tokenizer.json (None: mkmodel's synthetic one);
    extra: more mkmodel options (a mixture's experts)."""
    path = os.path.join(tmp, name + ".gguf")
    cmd = [env("TERN_CLI"), "mkmodel", "--arch", arch, "--type", "q8_0", "--embd", "64",
           "--layers", "2", "--heads", "2", "--kv-heads", "1", "--head-dim", "32", "--ff", "128",
           "--ctx", "2048", "--seed", "9", "-o", path]
    if vocab:
        cmd += ["--tokenizer", vocab]
    cmd += list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: mkmodel: " + r.stdout + r.stderr, file=sys.stderr)
        sys.exit(1)
    return path


def real_vocab(family, required=True):
    """The fetched tokenizer.json of a family (tools/fetch-vocab.sh), or the
    test cannot run; not required: None where it is missing (a test that
    runs its other parts without it)."""
    path = os.path.join(os.environ.get("TERN_VOCAB_DIR", ""), family, "tokenizer.json")
    if not os.path.isfile(path):
        if not required:
            return None
        cannot_run("no vocabulary at %s (tools/fetch-vocab.sh)" % path)
    return path


def make_projector(tmp, model, arch, args, name, checks=None):
    """A random-weight vision projector of architecture arch written by
    mkmodel for model (--target), as tmp/name; args: its shape options.
    Where mkmodel fails the test stops, or with checks, that is one failed
    check and the test goes on."""
    path = os.path.join(tmp, name)
    r = subprocess.run([env("TERN_CLI"), "mkmodel", "--arch", arch, "--target", model]
                       + list(args) + ["-o", path], capture_output=True, text=True)
    what = "mkmodel %s: %s%s" % (arch, r.stdout, r.stderr[-300:])
    if checks is not None:
        checks.check(r.returncode == 0, what)
    elif r.returncode != 0:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)
    return path


def png(w, h, row, declared=None):
    """An 8-bit RGB PNG of w x h pixels, row(y) the 3 * w bytes of row y
    (called in order); declared: the (width, height) its header says
    instead. (A row at a time: the image tests time requests that make
    800 x 800 pictures.)"""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + row(y) for y in range(h))
    dw, dh = declared or (w, h)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", dw, dh, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def noclose_vocab(tmp):
    """A byte-level vocabulary with no token for '"' or '}' (no byte
    tokens, no merges: each other printable ASCII character one token, no
    BOS, <|im_end|> its EOS): a json_object answer opens its object, then
    only whitespace can follow, 32 characters of it at most
    (TN_JSON_PREFIX_MAX_SPACE), then no token can continue it: an error in
    the middle of an answer, reached without any hook. The tokenizer.json's
    path."""
    d = os.path.join(tmp, "vocab-noclose")
    os.makedirs(d, exist_ok=True)
    symbols = [chr(c) for c in range(0x21, 0x7f) if chr(c) not in '"}'] + ["\u0120", "\u010a"]
    added = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump({"version": "1.0",
                   "added_tokens": [{"id": len(symbols) + i, "content": t, "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False,
                                     "special": True} for i, t in enumerate(added)],
                   "normalizer": None,
                   "pre_tokenizer": dict(level, type="ByteLevel"),
                   "post_processor": None,
                   "decoder": dict(level, type="ByteLevel"),
                   "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(symbols)},
                             "merges": []}}, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token": "<|im_end|>", "bos_token": None,
                   "chat_template": "{% for message in messages %}{{'<|im_start|>' + "
                                    "message['role'] + '\\n' + message['content'] + "
                                    "'<|im_end|>' + '\\n'}}{% endfor %}"
                                    "{% if add_generation_prompt %}"
                                    "{{ '<|im_start|>assistant\\n' }}{% endif %}"}, f)
    return os.path.join(d, "tokenizer.json")


def data_uri(data, mime="image/png"):
    return "data:%s;base64,%s" % (mime, base64.b64encode(data).decode())


def token_ids(model, text):
    """The ids `tern-cli tokenize` gives text with model's vocabulary."""
    r = subprocess.run([env("TERN_CLI"), "tokenize", "-m", model, "--json", text],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: tokenize: " + r.stderr, file=sys.stderr)
        sys.exit(1)
    return [t["id"] if isinstance(t, dict) else t for t in json.loads(r.stdout)]


def serve_refused(model, args, timeout=60):
    """tern-cli serve -m MODEL --port 0 ARGS... for options it must refuse at
    start: the finished process (returncode, stdout, stderr); a server that
    starts instead is killed at the timeout (subprocess.TimeoutExpired)."""
    return subprocess.run([env("TERN_CLI"), "serve", "-m", model, "--port", "0"] + list(args),
                          capture_output=True, text=True, timeout=timeout)


class Server:
    """tern-cli serve -m MODEL --port 0 ARGS..., stopped with SIGTERM."""

    def __init__(self, tmp, name, model, args=()):
        self.out_path = os.path.join(tmp, name + ".out")
        self.err_path = os.path.join(tmp, name + ".err")
        e = dict(os.environ)
        e["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
        self.proc = subprocess.Popen(
            [env("TERN_CLI"), "serve", "-m", model, "--port", "0", "-t", "1"] + list(args),
            stdout=open(self.out_path, "w"), stderr=open(self.err_path, "w"), env=e)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.proc.poll() is None:
            for line in open(self.out_path):
                if line.startswith("port "):
                    self.port = int(line.split()[1])
            if self.port:
                break
            time.sleep(0.05)
        if not self.port:
            self.proc.kill()
            print("FAIL: the server did not start: " + open(self.err_path).read(), file=sys.stderr)
            sys.exit(1)
        self.url = "http://127.0.0.1:%d" % self.port
        # A test that dies on an exception must not leave its server behind.
        atexit.register(self._kill)

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        """SIGTERM; returns the exit status (None: it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def stderr(self):
        return open(self.err_path).read()

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict with lower-case names, body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, out

    def post(self, path, body, **kw):
        status, hdrs, out = self.request("POST", path, body, **kw)
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        return status, hdrs, doc, out

    def health(self):
        return json.loads(self.request("GET", "/health")[2])

    def wait_health(self, checks, what, cond, seconds=120):
        """Polls /health until cond(its JSON) holds, then checks it: the
        deadline only stops a broken server from hanging the test, the
        check never reads it. Returns the last /health."""
        deadline = time.time() + seconds
        h = self.health()
        while not cond(h) and time.time() < deadline:
            time.sleep(0.05)
            h = self.health()
        checks.check(cond(h), "%s: %r" % (what, h))
        return h

    def stream(self, path, body, **kw):
        """POSTs body with "stream": true: (status, the events before
        [DONE] as dicts, whether [DONE] ended them, the body bytes). A
        status other than 200 has no events (its body is a JSON error)."""
        status, _, out = self.request("POST", path, dict(body, stream=True), **kw)
        if status != 200:
            return status, [], False, out
        events = sse_events(out)
        done = bool(events) and events[-1] == "[DONE]"
        return status, [json.loads(e) for e in events if e != "[DONE]"], done, out


def answer_complete(out):
    """A whole answer is in: its Content-Length of body, or a chunked body's
    last chunk. (The server keeps connections alive, so it need not close.)"""
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        return False
    lines = head.decode("latin-1").lower().split("\r\n")
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip() == "content-length" and value.strip().isdigit():
            return len(body) >= int(value.strip())
        if name.strip() == "transfer-encoding" and "chunked" in value:
            return body.endswith(b"0\r\n\r\n")
    return False


def raw_exchange(port, data, timeout=30, done=None):
    """Sends bytes on a fresh connection and reads until done(bytes read) is
    true, or the server closes it (or the timeout): every answer to
    pipelined requests, where done is None. (bytes read, seconds)."""
    t0 = time.time()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if done and done(out):
                break
    except OSError:  # timeout, reset, or a broken pipe while sending
        pass
    finally:
        s.close()
    return out, time.time() - t0


def raw_request(port, data, timeout=30):
    """Sends bytes on a fresh connection, reads until the answer is complete
    or the server closes it (or the timeout): (status or None, header text,
    body bytes, seconds)."""
    out, seconds = raw_exchange(port, data, timeout, answer_complete)
    head, _, body = out.partition(b"\r\n\r\n")
    status = None
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        pass
    return status, head.decode("latin-1"), body, seconds


def drop_request(port, path, body, nbytes, timeout=30):
    """POSTs body (JSON bytes) on a fresh connection, reads at most nbytes of
    the answer and closes: a client that goes away mid-answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)) + body)
        s.recv(nbytes)
    finally:
        s.close()


def sse_events(raw):
    """The data: payloads of an SSE body, in order (bytes -> list of str)."""
    events = []
    for block in raw.decode("utf-8", "replace").split("\n\n"):
        block = block.strip("\n")
        if not block:
            continue
        lines = block.split("\n")
        if not all(l.startswith("data: ") for l in lines):
            raise ValueError("not an SSE data event: %r" % block[:200])
        events.append("\n".join(l[6:] for l in lines))
    return events


def answer_text(doc):
    c = doc["choices"][0]
    return c["message"]["content"] if "message" in c else c["text"]


def c_literal(text):
    """The value of the adjacent C string literals in text ("NULL": None)."""
    if text.strip() == "NULL":
        return None
    out = bytearray()
    for piece in re.findall(r'"((?:[^"\\]|\\.)*)"', text):
        i = 0
        while i < len(piece):
            c = piece[i]
            if c != "\\":
                out += c.encode()
                i += 1
                continue
            e = piece[i + 1]
            if e == "x":
                out.append(int(piece[i + 2:i + 4], 16))
                i += 4
                continue
            out += {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\"}[e]
            i += 2
    return out.decode("utf-8")


def tool_records(path, prefix):
    """The records of tests/engine/PREFIX-tool-records.h (written by
    tools/*-tool-records.py): {name: (tools, want)}, each tool a (name,
    description, parameters JSON text) tuple, None where not given."""
    with open(path, encoding="utf-8") as f:
        header = f.read()
    arrays = {}
    for name, body in re.findall(r"static const tn_chat_tool (\w+)\[\] = \{\n(.*?)\n\};",
                                 header, re.S):
        arrays[name] = [
            (c_literal(n), c_literal(d), c_literal(p)) for n, d, p in re.findall(
                r"\{\.name = (.*?),\n\s+\.description = (.*?),\n\s+\.parameters = (.*?)\},"
                r"(?=\n|$)", body, re.S)]
    records = {}
    for name, body in re.findall(r'\{"(\w+)", (?:(?:true|false), ){1,2}%s_\w+, \d+,'
                                 r'(.*?)\},\n' % prefix, header, re.S):
        tools = re.search(r"\b(%s_\w+_tools)\b" % prefix, body)
        records[name] = (arrays.get(tools.group(1), []) if tools else [], c_literal(body))
    return records


def tools_json(tools):
    """A request's "tools" as JSON text, each schema its own text."""
    out = []
    for name, desc, params in tools:
        fn = '"name": ' + json.dumps(name)
        if desc is not None:
            fn += ', "description": ' + json.dumps(desc)
        if params is not None:
            fn += ', "parameters": ' + params
        out.append('{"type": "function", "function": {' + fn + '}}')
    return "[" + ", ".join(out) + "]"
