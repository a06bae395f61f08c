#!/usr/bin/env python3
"""Memory and descriptors of tern-cli serve under connections that end
badly: each attack runs --count times on its own connection, and the
server's VmRSS (/proc/PID/status) and open descriptors are printed before
and after it (docs/SERVER.md, "Kept-alive connections", has the figures).

  TERN_CLI=build/cli/tern-cli python3 tools/serve-attacks.py [--count 1000]
           [--only NAME,...]

Attacks: full (an answer read whole, closed: the baseline), reset (an
answer read whole, then SO_LINGER 0), partial (10 bytes of an answer read,
closed: the kernel resets), head-reset (half a head, reset), body-reset
(half a body, reset), post-reset (a whole generation request, reset 5 ms
later), stream-reset (300 bytes of a stream, reset), pipe-reset (three
requests in one send, 200 bytes read, reset), plain-reset (a generation
answered, then reset). Under AddressSanitizer its quarantine is turned off
for the server, as serve-soak does. A growth that goes on with the count
is a leak; a first run's one-off growth is the allocator's."""

import argparse
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "server"))
import serverlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--count", type=int, default=1000)
ap.add_argument("--only", default="")
args = ap.parse_args()

opts = os.environ.get("ASAN_OPTIONS", "")
os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
    "quarantine_size_mb=0:thread_local_quarantine_size_kb=0:detect_leaks=0"
tmp = serverlib.workdir("serve-attacks")
srv = serverlib.Server(tmp, "attacks", serverlib.make_model(tmp), ["--no-pin-cache"])


def post(body):
    data = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)


HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
STREAM = post({"prompt": "hi", "max_tokens": 40, "stream": True})
SHORT = post({"prompt": "hi", "max_tokens": 3})
LONGER = post({"prompt": "hi", "max_tokens": 30})


def read_answer(s):
    got = b""
    while not got.endswith(b"}"):
        b = s.recv(65536)
        if not b:
            break
        got += b


def attack(name, s):
    if name in ("full", "reset"):
        s.sendall(HEALTH)
        read_answer(s)
        return name == "reset"
    if name == "partial":
        s.sendall(HEALTH)
        s.recv(10)
        time.sleep(0.002)
        return False
    if name == "head-reset":
        s.sendall(HEALTH[:25])
    elif name == "body-reset":
        s.sendall(SHORT[:-10])
    elif name == "post-reset":
        s.sendall(LONGER)
    elif name == "stream-reset":
        s.sendall(STREAM)
        s.recv(300)
    elif name == "pipe-reset":
        s.sendall(SHORT * 3)
        s.recv(200)
    elif name == "plain-reset":
        s.sendall(SHORT)
        read_answer(s)
    time.sleep(0.005)
    return True


def status():
    rss = next(int(line.split()[1]) for line in open("/proc/%d/status" % srv.proc.pid)
               if line.startswith("VmRSS:"))
    return rss, len(os.listdir("/proc/%d/fd" % srv.proc.pid))


names = ["full", "reset", "partial", "head-reset", "body-reset", "post-reset", "stream-reset",
         "pipe-reset", "plain-reset"]
if args.only:
    names = [n for n in names if n in args.only.split(",")]
for name in names:
    for run in range(2):
        rss0, fds0 = status()
        for _ in range(args.count):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            try:
                if attack(name, s):
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            s.close()
        time.sleep(1.2)  # the server's sweep (500 ms)
        rss1, fds1 = status()
        print("%-13s run %d: %5d connections, VmRSS %+8.2f MB (%.1f), descriptors %d -> %d"
              % (name, run + 1, args.count, (rss1 - rss0) / 1024, rss1 / 1024, fds0, fds1),
              flush=True)
print("the server stopped with status %d" % srv.stop())
