#!/usr/bin/env python3
"""Memory of tern-cli serve over many requests (issue 17: every request that
reached the engine left its job, its HTTP message and its body allocated).

Sends --requests chat requests (each with a --pad byte field the server
ignores, so that a kept body shows), one connection each, and reads the
server's RSS (/proc/PID/status VmRSS) after the first --warmup and at the
end. Fails when it grew by more than --max-growth-mb. Then sends --methods
requests, each with a method of its own of --method-bytes bytes (libsoup
interns every method it reads, for good: 10,000 of 4 KB grew the server by
57 MB), and fails when that grew it by more than --max-growth-mb. Then
sends --ranges GETs of /v1/models with "Range: bytes=0-,0-,..." (20,000
ranges): libsoup 3.2 answered each with a 3.8 MB multipart 206, built on
the main loop (1-2 s each under AddressSanitizer); the Range header is
ignored now, so each must get the plain 200.

  meson test serve-soak          a small count (part of make test)
  python3 tests/server/soak.py --requests 10000   by hand (docs/SERVER.md)

By hand it needs TERN_CLI (a release build's tern-cli); TERN_TEST_TMP is
optional. Under AddressSanitizer the quarantine keeps freed memory mapped, so
the test turns it off for the server (ASAN_OPTIONS); LeakSanitizer stays on,
so that what RSS cannot tell (a small leak per request) fails the clean stop."""

import argparse
import http.client
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--requests", type=int, default=10000)
ap.add_argument("--warmup", type=int, default=100)
ap.add_argument("--pad", type=int, default=16384, help="bytes of an ignored field per body")
ap.add_argument("--max-growth-mb", type=float, default=5.0)
ap.add_argument("--every", type=int, default=1000, help="print RSS every N requests")
ap.add_argument("--methods", type=int, default=2000, help="requests with a method of their own")
ap.add_argument("--method-bytes", type=int, default=4096)
ap.add_argument("--ranges", type=int, default=20, help="GETs with 20,000 ranges each")
ap.add_argument("--idle-closes", type=int, default=8000,
                help="kept-alive connections the client closes after one answer")
ap.add_argument("--reset-closes", type=int, default=4000,
                help="connections the client resets (SO_LINGER 0) after one answer")
args = ap.parse_args()

opts = os.environ.get("ASAN_OPTIONS", "")
os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
    "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

checks = serverlib.Checks()
tmp = serverlib.workdir("soak")
model = serverlib.make_model(tmp)
srv = serverlib.Server(tmp, "soak", model, ["--queue", "4"])


def rss_kb():
    for line in open("/proc/%d/status" % srv.proc.pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


QUESTIONS = ["apples", "pears", "the sea", "rivers", "copper", "kettle"]
pad = "x" * args.pad
failed = 0
rss_warm = None
t0 = time.time()
for i in range(args.requests):
    body = {"model": "tiny", "max_tokens": 1, "user": pad,
            "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}]}
    if i % 4 == 3:
        body["stream"] = True
    try:
        if srv.request("POST", "/v1/chat/completions", body, timeout=60)[0] != 200:
            failed += 1
    except OSError:
        failed += 1
    if i + 1 == args.warmup:
        rss_warm = rss_kb()
    if args.every and (i + 1) % args.every == 0:
        print("%6d requests: RSS %.1f MiB (%.0f s)" % (i + 1, rss_kb() / 1024, time.time() - t0),
              flush=True)
rss_end = rss_kb()
growth = (rss_end - rss_warm) / 1024
print("RSS after %d requests: %.1f MiB; after %d: %.1f MiB; growth %.2f MiB; %.1f requests/s"
      % (args.warmup, rss_warm / 1024, args.requests, rss_end / 1024, growth,
         args.requests / (time.time() - t0)))
checks.check(failed == 0, "every request answered (%d failed)" % failed)
checks.check(growth <= args.max_growth_mb,
             "RSS grew %.2f MiB from request %d to %d (limit %.1f)" %
             (growth, args.warmup, args.requests, args.max_growth_mb))

# Methods no client of this server sends, each its own: refused on the head
# (501) before libsoup reads it, so none is kept.
rss_before = None
refused = 0
for i in range(args.methods):
    if i == args.methods // 10:
        rss_before = rss_kb()  # after the buffers' first growth
    method = ("M%08d" % i).ljust(args.method_bytes, "A")
    answer, _ = serverlib.raw_exchange(
        srv.port, ("%s /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                   % method).encode())
    refused += answer.startswith(b"HTTP/1.1 501 ")
growth = (rss_kb() - (rss_before or rss_kb())) / 1024
print("%d requests with methods of their own (%d bytes): RSS grew %.2f MiB over the last %d"
      % (args.methods, args.method_bytes, growth, args.methods - args.methods // 10))
checks.check(refused == args.methods, "every unknown method refused with 501 (%d of %d)" %
             (refused, args.methods))
checks.check(growth <= args.max_growth_mb,
             "RSS grew %.2f MiB over %d unknown methods (limit %.1f)" %
             (growth, args.methods, args.max_growth_mb))
# One GET on a kept-alive connection, read, then closed by the client (what
# curl and Python's http.client do): libsoup 3.2 read the end before it
# started the next request and never let the connection go, 2.5 KB each
# (6 KB under AddressSanitizer) until the server stopped.
rss_before = None
answered = 0
for i in range(args.idle_closes):
    if i == args.idle_closes // 2:
        time.sleep(1.2)  # the sweep's round (500 ms): the first half's all gone
        rss_before = rss_kb()  # the allocator's arenas grown (3 MiB over the first 3,000)
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        answered += r.status == 200 and r.getheader("Connection", "").lower() != "close"
    except OSError:
        pass
    finally:
        c.close()
time.sleep(1.2)  # the sweep's round (500 ms) for the last ones
growth = (rss_kb() - (rss_before or rss_kb())) / 1024
print("%d kept-alive connections closed by the client: RSS grew %.2f MiB over the last %d"
      % (args.idle_closes, growth, args.idle_closes - args.idle_closes // 2))
checks.check(answered == args.idle_closes, "every GET answered on a kept-alive connection "
             "(%d of %d)" % (answered, args.idle_closes))
checks.check(growth <= args.max_growth_mb,
             "RSS grew %.2f MiB over %d kept-alive connections closed by their client "
             "(limit %.1f)" % (growth, args.idle_closes, args.max_growth_mb))
# The same, the client closing with a reset (SO_LINGER 0; a client closing
# with bytes of its answer unread resets as well): the framed stream gave
# libsoup the read's error, not the end, and libsoup 3.2 kept each such
# connection as it did those above (1,000 of them grew an AddressSanitizer
# server by 6.8 MB).
rss_before = None
answered = 0
for i in range(args.reset_closes):
    if i == args.reset_closes // 2:
        time.sleep(1.2)  # the sweep's round (500 ms): the first half's all gone
        rss_before = rss_kb()
    sk = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    try:
        sk.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = b""
        while not got.endswith(b"}"):
            b = sk.recv(65536)
            if not b:
                break
            got += b
        answered += got.startswith(b"HTTP/1.1 200")
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    finally:
        sk.close()
time.sleep(1.2)
growth = (rss_kb() - (rss_before or rss_kb())) / 1024
print("%d connections reset by the client after an answer: RSS grew %.2f MiB over the last %d"
      % (args.reset_closes, growth, args.reset_closes - args.reset_closes // 2))
checks.check(answered == args.reset_closes, "every GET answered before the reset (%d of %d)"
             % (answered, args.reset_closes))
checks.check(growth <= args.max_growth_mb,
             "RSS grew %.2f MiB over %d connections reset by their client (limit %.1f)" %
             (growth, args.reset_closes, args.max_growth_mb))
# Range: bytes=0-,0-,... in one GET: ignored, the plain answer.
status, _, plain = srv.request("GET", "/v1/models")
spec = "bytes=" + ",".join(["0-"] * 20000)
ranged = 0
t1 = time.time()
for i in range(args.ranges):
    try:
        status, hdrs, out = srv.request("GET", "/v1/models", headers={"Range": spec}, timeout=60)
        ranged += status == 200 and len(out) == len(plain) and "content-range" not in hdrs
    except OSError:
        pass
print("%d GETs with 20,000 ranges each: %d answered plainly, %.2f s each"
      % (args.ranges, ranged, (time.time() - t1) / max(args.ranges, 1)))
checks.check(ranged == args.ranges, "every Range ignored: the plain 200 (%d of %d)" %
             (ranged, args.ranges))

checks.check(srv.stop() == 0, "stops cleanly")
checks.finish()
