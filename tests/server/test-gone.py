#!/usr/bin/env python3
"""A streaming client that leaves while the server holds its text back
(tern-cli serve, real HTTP; docs/SERVER.md, "Disconnects"):
  - its text held back (here a possible stop string: nothing is written to
    the socket), the client closes: its generation stops and it counts as
    abandoned, and the next request is answered without waiting for the
    first's max_tokens;
  - one that only shuts down its sending side is gone too, and reads why
    in an error event;
  - a slow reader (its connection open, nothing read for a while) is not
    gone: it gets its whole answer.
The checks look at /health's counters, not at times: the deadlines only
stop a broken server from hanging the test.

A tiny random-weight model with the Qwen3 vocabulary, in which "ab" is one
token: a logit_bias makes every token "ab", and a stop string "b" + "ab" *
N + "!" holds back all of "abab..." after its first "a"."""

import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
tmp = serverlib.workdir("serve-gone")
model = serverlib.make_model(tmp, name="qwen3", vocab=serverlib.real_vocab("qwen3"),
                             arch="qwen3")
ab = serverlib.token_ids(model, "ab")
checks.check(len(ab) == 1 and serverlib.token_ids(model, "abab") == ab * 2,
             "'ab' is one token of the vocabulary (%r)" % ab)
# 1,500 tokens of 50 ms: the engine is busy for 75 s unless the server
# sees its client leave.
srv = serverlib.Server(tmp, "gone", model, ["--debug-token-delay", "50"])
HELD = {"prompt": "x", "max_tokens": 1500, "stream": True, "temperature": 0,
        "logit_bias": {str(ab[0]): 100}, "stop": "b" + "ab" * 1600 + "!"}


def open_stream(body):
    """A stream whose first text ("a") has come: the socket, what it read."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
              b"application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    got = b""
    while b'"text":"a"' not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    checks.check(got.startswith(b"HTTP/1.1 200") and b'"text":"a"' in got,
                 "the held stream's first text comes: %r" % got[:400])
    return s, got


# --- closed while all its text is held ---------------------------------------
# Unnoticed, the engine went on for all of its max_tokens (75 s here): the
# next request waited, and the first counted as abandoned only when its
# answer's end failed to be written. Noticed, it stops within a token or
# two; the 30 s deadline is far from both.
h0 = srv.health()
s, _ = open_stream(HELD)
h = srv.health()
checks.check(h["queue"] == 1, "the held stream runs: %r" % h)
s.close()
srv.wait_health(checks, "the held stream whose client closed counts as abandoned, the engine is free",
         lambda h: h["abandoned"] == h0["abandoned"] + 1 and h["queue"] == 0, seconds=30)
status, _, doc, raw = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
h = srv.health()
checks.check(status == 200 and h["served"] == h0["served"] + 1,
             "the next request is answered (%s %r; %r)" % (status, raw[:200], h))

# --- half-closed: it sends nothing more --------------------------------------
# HTTP/1.1 lets a client half-close, but a client that waits for an answer
# has no reason to (curl, browsers and the SDKs do not); the server cannot
# tell it from one whose socket closed under a dead process, so it stops
# the generation and says why (docs/SERVER.md).
h1 = srv.health()
s, got = open_stream(HELD)
s.shutdown(socket.SHUT_WR)
s.settimeout(120)
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
except OSError:
    pass
s.close()
checks.check(b"client_closed" in got,
             "a held stream whose client half-closed reads why it ended: %r" % got[-400:])
srv.wait_health(checks, "the half-closed stream counts as abandoned, the engine is free",
         lambda h: h["abandoned"] == h1["abandoned"] + 1 and h["queue"] == 0, seconds=30)

# --- a slow reader is not gone -----------------------------------------------
# 40 tokens of "ab", each written at once, none read until the answer is
# complete: an open connection whose reader waits is still a client.
h2 = srv.health()
data = json.dumps({"prompt": "x", "max_tokens": 40, "stream": True, "temperature": 0,
                   "logit_bias": {str(ab[0]): 100}}).encode()
s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          b"application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
srv.wait_health(checks, "the slow reader's answer is complete before it reads",
         lambda h: h["served"] == h2["served"] + 1 and h["queue"] == 0)
got = b""
while not got.endswith(b"0\r\n\r\n"):
    b = s.recv(65536)
    if not b:
        break
    got += b
s.close()
# Each event is one chunk of the chunked body: its texts, in order.
text = "".join(m.decode() for m in re.findall(rb'"text":"((?:ab)*)"', got))
h = srv.health()
checks.check(b"data: [DONE]" in got and text == "ab" * 40 and
             h["abandoned"] == h2["abandoned"],
             "the slow reader gets its whole answer and is not abandoned (%r, %r)"
             % (h, got[-300:]))
checks.check(srv.stop() == 0, "the server stops cleanly: " + srv.stderr()[-2000:])
checks.finish()
