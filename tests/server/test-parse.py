#!/usr/bin/env python3
"""GET /health and GET /v1/models are answered while a big body is read
into a request (docs/SERVER.md, "Big bodies and /health"): the strict
JSON check, json-glib and the request's checks run off the server's
context, so a liveness probe does not wait behind 8 MB of JSON.

An ordering check, no timing: the big request's body is in the server's
socket (nothing of it left in ours) before /health and /v1/models are
sent, and their answers must come before its own."""

import fcntl
import json
import os
import select
import socket
import sys
import termios

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

MAX_BODY = 9 * 1000 * 1000
checks = serverlib.Checks()
tmp = serverlib.workdir("serve-parse")
srv = serverlib.Server(tmp, "parse", serverlib.make_model(tmp),
                       ["--no-pin-cache", "--max-body", str(MAX_BODY)])


def post_bytes(path, body):
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)) + body)


def get_bytes(path):
    return b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path.encode()


def connect():
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=300)
    return s


def sent_all(s):
    """Until our side holds none of what was sent (TIOCOUTQ: bytes not yet
    taken by the peer's kernel). Waits on the server's reading, never on
    a clock."""
    buf = bytearray(4)
    while True:
        fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, buf)
        if int.from_bytes(buf, sys.byteorder) == 0:
            return
        select.select([], [], [], 0.005)


def complete(data):
    """The status and body of a whole HTTP answer in data, or None."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if len(rest) < length:
        return None
    return int(head.split(b" ")[1]), rest[:length]


def answers_in_order(socks):
    """Reads the answer on each of socks (name -> socket): the names in the
    order their answers completed, and name -> (status, body)."""
    got = {name: b"" for name in socks}
    done, order = {}, []
    while len(done) < len(socks):
        waiting = [s for n, s in socks.items() if n not in done]
        ready, _, _ = select.select(waiting, [], [], 300)
        checks.check(ready, "no answer in 300 s")
        if not ready:
            break
        for s in ready:
            name = next(n for n, x in socks.items() if x is s)
            chunk = s.recv(1 << 20)
            got[name] += chunk
            answer = complete(got[name])
            if answer or not chunk:
                done[name] = answer or (0, got[name])
                order.append(name)
    return order, done


def while_big(what, path, body, expect_status, expect_code):
    big = connect()
    big.sendall(post_bytes(path, body))
    sent_all(big)
    health, models = connect(), connect()
    health.sendall(get_bytes("/health"))
    models.sendall(get_bytes("/v1/models"))
    order, done = answers_in_order({"big": big, "health": health, "models": models})
    for s in (big, health, models):
        s.close()
    print("%s: answers in the order %s" % (what, order), flush=True)
    status, out = done.get("big", (0, b""))
    try:
        code = json.loads(out)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = None
    checks.check(status == expect_status and code == expect_code,
                 "%s: the big request read whole and refused %d %s: %d %r"
                 % (what, expect_status, expect_code, status, out[:300]))
    checks.check(done.get("health", (0,))[0] == 200 and done.get("models", (0,))[0] == 200,
                 "%s: /health and /v1/models answered 200: %r" % (what, done))
    checks.check(order.index("health") < order.index("big"),
                 "%s: /health answered before the big request, not after: %s" % (what, order))
    checks.check(order.index("models") < order.index("big"),
                 "%s: /v1/models answered before the big request, not after: %s"
                 % (what, order))


# 99,000 small objects (198,000 values, under the limit of 200,000) in
# 800 KB: json-glib builds a table for each, the slowest body to parse
# for its size, and small enough to be in the server's socket whole.
while_big("99,000 objects", "/v1/completions",
          b'{"prompt": "hi", "max_tokens": 1, "user": [' + b'{"a":0},' * 99000 +
          b'0], "model": "not-served"}', 404, "model_not_found")
# 8 MB of one word: the strict check, json-glib and the prompt's bound
# all read it (400 context_length_exceeded from its length).
word = b"a" * (8 * 1000 * 1000)
while_big("8 MB prompt", "/v1/completions",
          b'{"max_tokens": 1, "prompt": "' + word + b'"}', 400, "context_length_exceeded")
while_big("8 MB message", "/v1/chat/completions",
          b'{"max_tokens": 1, "messages": [{"role": "user", "content": "' + word + b'"}]}',
          400, "context_length_exceeded")
# Valid JSON read whole, then refused: the model is not this server's.
while_big("8 MB of numbers", "/v1/completions",
          b'{"prompt": "hi", "max_tokens": 1, "user": [' + b"1234567890123456.5, " * 190000 +
          b'0], "model": "not-served"}', 404, "model_not_found")

# A client that leaves while its body is read: counted abandoned once it
# is read, as one that leaves in the queue, and the server goes on.
abandoned = srv.health()["abandoned"]
gone = connect()
gone.sendall(post_bytes("/v1/completions", b'{"max_tokens": 1, "prompt": "' + word + b'"}'))
sent_all(gone)
gone.close()
srv.wait_health(checks, "the client that left while its body was read is counted abandoned",
                lambda h: h["abandoned"] == abandoned + 1)
status, _, doc, out = srv.post("/v1/completions", {"prompt": "hi", "max_tokens": 2})
checks.check(status == 200 and doc and doc["choices"][0]["text"] is not None,
             "a request after a client left during its read is answered: %d %r"
             % (status, out[:200]))
checks.check(srv.health()["status"] == "ok", "/health after it")

rc = srv.stop()
checks.check(rc == 0, "the server stopped cleanly: %r\n%s" % (rc, srv.stderr()[-2000:]))
checks.check("still allocated" not in srv.stderr(), "no request's state left: " + srv.stderr()[-2000:])
checks.finish()
