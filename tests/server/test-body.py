#!/usr/bin/env python3
"""tern-cli serve: what a request's body costs the server while it arrives
(docs/SERVER.md, "Body size").

libsoup keeps each piece of a body it reads as a GBytes of its own in a list,
~150 bytes of bookkeeping a piece (~260 under AddressSanitizer). A chunked
body of 1-byte chunks ("1\\r\\nx\\r\\n", 6 bytes on the wire for each byte of
body) is a million pieces for 1 MiB: it held 150 MB of the server's memory
until the request was answered or timed out, eight such clients at once
nearly 1 GB, and --max-body 20 MiB (images on) 3 GB each. The server keeps
the body itself now, in one buffer a request.

Checked: the peak RSS (VmHWM) of a server taking four 1-byte-chunked
bodies of ~1 MiB at once (and a GET with one, and one over the limit) grows
by less than 64 MiB; the answers are those of the same bodies sent with a
Content-Length; the one over the limit is 413."""

import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

# Freed memory must leave RSS (the quarantine would keep it mapped).
opts = os.environ.get("ASAN_OPTIONS", "")
os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
    "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("body")
model = serverlib.make_model(tmp)
srv = serverlib.Server(tmp, "body", model, ["--request-timeout", "120"])
LIMIT = 1048576


def status_kb(field):
    for line in open("/proc/%d/status" % srv.proc.pid):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def body_of(n, prompt):
    """A completion request of exactly n bytes (an ignored field pads it)."""
    head = json.dumps({"prompt": prompt, "max_tokens": 4, "pad": ""})[:-2]
    return (head + "x" * (n - len(head) - 2) + '"}').encode()


def read_answer(s):
    """(status, body) of one answer with a Content-Length."""
    out = b""
    while b"\r\n\r\n" not in out:
        b = s.recv(65536)
        if not b:
            return None, out
        out += b
    head, _, rest = out.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        b = s.recv(65536)
        if not b:
            break
        rest += b
    return int(head.split(b" ")[1]), rest[:length]


def send_chunked(method, path, body, results, i):
    """The body in 1-byte chunks, then its answer into results[i]."""
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=300)
        s.sendall(("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n" % (method, path)).encode())
        step = 65536
        for at in range(0, len(body), step):
            s.sendall(b"".join(b"1\r\n" + body[k:k + 1] + b"\r\n"
                               for k in range(at, min(at + step, len(body)))))
        s.sendall(b"0\r\n\r\n")
        results[i] = read_answer(s)
        s.close()
    except OSError as e:
        results[i] = (None, str(e).encode())


# Warm up (the allocator's pools, the first request's own costs), then the
# peak from here on.
for i in range(3):
    srv.post("/v1/completions", {"prompt": "warm %d" % i, "max_tokens": 4})
hwm0 = status_kb("VmHWM")

SIZE = LIMIT - 4096
bodies = [body_of(SIZE, "tern %d" % i) for i in range(4)]
jobs = [("POST", "/v1/completions", b) for b in bodies]
jobs.append(("GET", "/v1/models", bodies[0]))
jobs.append(("POST", "/v1/completions", body_of(LIMIT + 65536, "too long")))
results = [None] * len(jobs)
threads = [threading.Thread(target=send_chunked, args=(m, p, b, results, i))
           for i, (m, p, b) in enumerate(jobs)]
for t in threads:
    t.start()
for t in threads:
    t.join()
growth = (status_kb("VmHWM") - hwm0) / 1024
print("peak RSS growth with 1-byte chunks: %.1f MiB" % growth)
check(growth < 64, "six bodies of 1-byte chunks at once raise the peak RSS by < 64 MiB "
      "(%.1f MiB)" % growth)

for i, b in enumerate(bodies):
    st, out = results[i]
    want_st, _, want, _ = srv.post("/v1/completions", b)
    check(st == 200 and want_st == 200, "1-byte chunks %d: 200 (%s)" % (i, st))
    try:
        got = json.loads(out)["choices"][0]["text"]
    except (ValueError, KeyError, TypeError):
        got = None
    check(got is not None and got == want["choices"][0]["text"],
          "1-byte chunks %d: the answer of the same body with Content-Length" % i)
st, out = results[4]
check(st == 200 and b'"object":"list"' in out, "GET with a chunked body: 200 (%s)" % st)
st, out = results[5]
check(st == 413 and b"request_too_large" in out,
      "a chunked body over --max-body: 413 (%s %r)" % (st, out[:80]))

# Chunks of other sizes, and an empty body: still the same answers.
b = body_of(5000, "sizes")
want_st, _, want, _ = srv.post("/v1/completions", b)
s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
parts, at, k = [], 0, 1
while at < len(b):
    parts.append(b"%x\r\n" % len(b[at:at + k]) + b[at:at + k] + b"\r\n")
    at += k
    k = k * 3 % 1000 + 1
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(parts) +
          b"0\r\n\r\n")
st, out = read_answer(s)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          b"application/json\r\nContent-Length: 0\r\n\r\n")
st0, out0 = read_answer(s)
s.close()
check(st == 200 and json.loads(out)["choices"][0]["text"] == want["choices"][0]["text"],
      "chunks of mixed sizes: the same answer")
check(st0 == 400 and b"invalid_json" in out0, "an empty body: 400 invalid_json (%s %r)" % (st0, out0[:120]))

rc = srv.stop()
check(rc == 0, "the server exits 0 (LeakSanitizer finds nothing): %s" % rc)
sys.exit(checks.finish())
