#!/usr/bin/env python3
"""tern-cli serve and requests it read wrongly, one way or the other
(docs/SERVER.md):

- `Authorization: Bearer  KEY` with more than one space, and the scheme in
  any case, is the key (RFC 9110 11.4: 1*SP between scheme and
  credentials); it was a 401. A wrong or missing key is still one.
- an HTTP/1.1 request with an empty Host is a 400 (RFC 9112 3.2: an
  invalid Host; an "http" URI needs a non-empty host, RFC 9110 4.2.1); it
  was answered, and passed the DNS-rebinding check as no Host. HTTP/1.0
  may still send none, or an empty one (RFC 9112 3.3: the server's own
  name), and an absolute-form target makes Host irrelevant."""

import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("strict")
model = serverlib.make_model(tmp)
KEY = "sk-strict"
srv = serverlib.Server(tmp, "strict", model, ["--api-key", KEY, "--request-timeout", "5"])
AUTH = {"Authorization": "Bearer " + KEY}


def raw(head, timeout=5):
    """The status of the answer to one raw request head (no body), or None."""
    sk = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    sk.sendall(head)
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            b = sk.recv(65536)
            if not b:
                break
            buf += b
        # the body, for the message (Content-Length; errors are small)
        sk.settimeout(0.5)
        while True:
            b = sk.recv(65536)
            if not b:
                break
            buf += b
    except OSError:
        pass
    sk.close()
    line = buf.split(b"\r\n", 1)[0].split()
    return (int(line[1]) if len(line) > 1 and line[1].isdigit() else None,
            buf.partition(b"\r\n\r\n")[2])


# ------------------------------------------------------------ the API key
for label, value, want in [
        ("one space", "Bearer " + KEY, 200),
        ("two spaces", "Bearer  " + KEY, 200),
        ("five spaces", "Bearer     " + KEY, 200),
        ("the scheme in lower case", "bearer " + KEY, 200),
        ("the scheme in upper case, two spaces", "BEARER  " + KEY, 200),
        ("a wrong key after two spaces", "Bearer  nope", 401),
        ("the key with a space inside", "Bearer sk- strict", 401),
        ("a tab instead of the space", "Bearer\t" + KEY, 401),
        ("no space", "Bearer" + KEY, 401),
        ("the scheme alone", "Bearer", 401),
        ("the scheme and spaces", "Bearer   ", 401),
        ("another scheme", "Basic " + KEY, 401)]:
    status, _, _ = srv.request("GET", "/v1/models", headers={"Authorization": value})
    check(status == want, "Authorization: %r (%s): %d (got %s)" % (value, label, want, status))

# ------------------------------------------------------------ Host
for head, want in [
        (b"GET /v1/models HTTP/1.1\r\nHost:\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: \r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost:   \t\r\n", 400),
        (b"GET /health HTTP/1.1\r\nHost:\r\n", 400),
        (b"OPTIONS * HTTP/1.1\r\nHost:\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n", 200),
        (b"GET /v1/models HTTP/1.0\r\nHost:\r\n", 200),
        (b"GET /v1/models HTTP/1.0\r\n", 200),
        (b"GET http://127.0.0.1/v1/models HTTP/1.1\r\nHost:\r\n", 200),
        (b"GET http://evil.example/v1/models HTTP/1.1\r\nHost:\r\n", 403)]:
    status, body = raw(head + ("Authorization: Bearer %s\r\nConnection: close\r\n\r\n" %
                               KEY).encode())
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    ok = status == want
    if want == 400:
        msg = doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""
        ok = ok and "Host" in msg
    check(ok, "%r: %d%s (got %s %r)" % (head, want, " naming Host" if want == 400 else "",
                                        status, body[:160]))


check(srv.stop() == 0, "the server stops cleanly")
checks.finish()
