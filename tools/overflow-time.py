#!/usr/bin/env python3
"""How long the server takes to refuse a chat message that cannot fit
(docs/SERVER.md, "Requests that cannot fit"): one message of SIZE bytes of
one letter (the slowest text to encode: one long piece) on a 1024-token
context, answered 400 context_length_exceeded.

usage: overflow-time.py TERN_CLI SIZE... (bytes; 1M and 8M are 1 MiB and 8 MiB)

A tiny random-weight model with the synthetic vocabulary, built in a
temporary directory; the server's --max-body is raised to fit the largest
body. Each size is sent three times; the times are wall-clock, from the
request to the answer, on whatever machine runs this."""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cli, sizes = sys.argv[1], [size(a) for a in sys.argv[2:]]
    tmp = tempfile.mkdtemp(prefix="overflow-time.")
    model = os.path.join(tmp, "tiny.gguf")
    subprocess.run([cli, "mkmodel", "--arch", "llama", "--type", "q8_0", "--embd", "64",
                    "--layers", "2", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
                    "--ff", "128", "--ctx", "2048", "--seed", "9", "-o", model], check=True,
                   capture_output=True)
    out = open(os.path.join(tmp, "serve.out"), "w")
    srv = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "-t", "1", "-c", "1024",
                            "--max-body", str(max(sizes) + (1 << 16))],
                           stdout=out, stderr=subprocess.DEVNULL,
                           env=dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache")))
    port = None
    for _ in range(1200):
        for line in open(out.name):
            if line.startswith("port "):
                port = int(line.split()[1])
        if port:
            break
        time.sleep(0.05)
    try:
        for n in sizes:
            body = json.dumps({"messages": [{"role": "user", "content": "a" * n}],
                               "max_tokens": 1}).encode()
            times = []
            for _ in range(3):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                t0 = time.monotonic()
                c.request("POST", "/v1/chat/completions", body,
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                doc = json.loads(r.read())
                times.append(time.monotonic() - t0)
                c.close()
            err = doc.get("error", {})
            print("%9d bytes: %d %s, %s s; %s" % (n, r.status, err.get("code"),
                                                  " ".join("%.2f" % t for t in times),
                                                  err.get("message")))
    finally:
        srv.terminate()
        srv.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
