#!/usr/bin/env python3
"""How quickly tern-cli serve answers GET /health while clients flood it
with big request bodies (docs/SERVER.md, "Big bodies and /health").

  TERN_CLI=build/cli/tern-cli python3 tools/health-flood.py
      [--clients 3] [--size 700000] [--kind numbers,invalid,prompt,deep]
      [--seconds 20] [--max-body BYTES]

Each of --clients threads posts bodies of about --size bytes to
/v1/completions, one after another on a kept-alive connection, for
--seconds; the kinds take turns: numbers (valid JSON, an ignored member
of numbers, and a model the server does not serve: parsed whole, then
404), invalid (the same with one stray byte at its end: 400 from the
strict check), prompt (a valid request whose prompt is one long word:
refused 400 context_length_exceeded from its length) and deep (arrays
nested 100 deep around a string, repeated: valid, then 404). A prober asks GET /health
every 20 ms on a fresh connection and times the answer. Printed: the
bodies sent and their statuses, and /health's median, p99 and max
latency, with the same for a quiet server first (the baseline)."""

import argparse
import http.client
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "server"))
import serverlib  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--clients", type=int, default=3)
ap.add_argument("--size", type=int, default=700000)
ap.add_argument("--kind", default="numbers,invalid,prompt,deep")
ap.add_argument("--seconds", type=float, default=20)
ap.add_argument("--max-body", type=int, default=0,
                help="the server's --max-body (0: the larger of 1 MiB and --size plus 4 KiB)")
args = ap.parse_args()


def body(kind, size):
    if kind == "numbers":
        head = b'{"prompt": "hi", "max_tokens": 1, "model": "not-served", "user": ['
        item = b"12345.678, "
        n = max(1, (size - len(head) - 16) // len(item))
        return head + item * n + b"0]}"
    if kind == "invalid":
        return body("numbers", size - 1)[:-1] + b",}"
    if kind == "prompt":
        head = b'{"max_tokens": 1, "prompt": "'
        return head + b"a" * max(1, size - len(head) - 2) + b'"}'
    if kind == "deep":
        head = b'{"prompt": "hi", "max_tokens": 1, "model": "not-served", "user": ['
        item = b"[" * 99 + b'"' + b"x" * 800 + b'"' + b"]" * 99 + b", "
        n = max(1, (size - len(head) - 16) // len(item))
        return head + item * n + b"0]}"
    raise SystemExit("unknown kind " + kind)


kinds = [k for k in args.kind.split(",") if k]
bodies = {k: body(k, args.size) for k in kinds}
max_body = args.max_body or max(1 << 20, args.size + 4096)

tmp = serverlib.workdir("health-flood")
srv = serverlib.Server(tmp, "flood", serverlib.make_model(tmp),
                       ["--no-pin-cache", "--max-body", str(max_body)])


def probe(until, lat):
    while time.time() < until:
        t0 = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                lat.append(time.perf_counter() - t0)
        except (OSError, http.client.HTTPException):
            lat.append(float("inf"))
        finally:
            c.close()
        time.sleep(0.02)


def flood(until, index, statuses, lock):
    c = None
    i = index
    while time.time() < until:
        kind = kinds[i % len(kinds)]
        i += 1
        try:
            if c is None:
                c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
            c.request("POST", "/v1/completions", body=bodies[kind],
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            status = r.status
            if r.getheader("Connection", "").lower() == "close":
                c.close()
                c = None
        except (OSError, http.client.HTTPException) as e:
            status = type(e).__name__
            c.close()
            c = None
        with lock:
            statuses[(kind, status)] = statuses.get((kind, status), 0) + 1
    if c:
        c.close()


def summary(name, lat):
    if not lat:
        print("%s: no answer" % name)
        return
    s = sorted(lat)
    p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
    print("%s: %d probes, median %.4f s, p99 %.4f s, max %.4f s"
          % (name, len(s), statistics.median(s), p99, s[-1]), flush=True)


quiet = []
probe(time.time() + min(5.0, args.seconds), quiet)
summary("quiet", quiet)

until = time.time() + args.seconds
lat, statuses, lock = [], {}, threading.Lock()
threads = [threading.Thread(target=flood, args=(until, i, statuses, lock))
           for i in range(args.clients)]
for t in threads:
    t.start()
probe(until, lat)
for t in threads:
    t.join()
print("flood: %d clients, %d-byte bodies (--max-body %d), kinds %s"
      % (args.clients, args.size, max_body, ",".join(kinds)))
for (kind, status), n in sorted(statuses.items(), key=str):
    print("  %s -> %s: %d" % (kind, status, n))
summary("flooded", lat)
srv.stop()
