#!/usr/bin/env python3
"""How long the server takes to refuse a chat message that cannot fit
(docs/SERVER.md, "Requests that cannot fit"): one message of SIZE bytes of
one letter (the slowest text to encode: one long piece) on a 1024-token
context, answered 400 context_length_exceeded.

usage: overflow-time.py TERN_CLI [--vocab TOKENIZER_JSON --arch ARCH]
                        [--unit a|cjk|emoji] [--prompt] SIZE...
(bytes; 1M and 8M are 1 MiB and 8 MiB)

--vocab: a real vocabulary (tools/fetch-vocab.sh) for the model, --arch its
architecture (qwen3, gemma3, llama); --unit: one letter (default), random
CJK ideographs or random emoji, whole characters up to SIZE bytes; --prompt:
a /v1/completions prompt instead of a chat message.

A tiny random-weight model with the synthetic vocabulary, built in a
temporary directory; the server's --max-body is raised to fit the largest
body. Each size is sent three times; the times are wall-clock, from the
request to the answer, on whatever machine runs this."""

import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def text_of(unit, n):
    if unit == "a":
        return "a" * n
    rng = random.Random(7)
    lo, hi, width = (0x4E00, 0x9FFF, 3) if unit == "cjk" else (0x1F600, 0x1F64F, 4)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n // width))


def main():
    args, vocab, arch, unit, prompt = sys.argv[1:], None, "llama", "a", False
    while len(args) > 1 and args[1].startswith("--"):
        opt = args.pop(1)
        if opt == "--prompt":
            prompt = True
        elif opt in ("--vocab", "--arch", "--unit") and len(args) > 1:
            value = args.pop(1)
            vocab, arch, unit = ((value, arch, unit) if opt == "--vocab" else
                                 (vocab, value, unit) if opt == "--arch" else
                                 (vocab, arch, value))
        else:
            args = []
    if len(args) < 2 or unit not in ("a", "cjk", "emoji"):
        print(__doc__)
        return 2
    cli, sizes = args[0], [size(a) for a in args[1:]]
    tmp = tempfile.mkdtemp(prefix="overflow-time.")
    model = os.path.join(tmp, "tiny.gguf")
    subprocess.run([cli, "mkmodel", "--arch", arch, "--type", "q8_0", "--embd", "64",
                    "--layers", "2", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
                    "--ff", "128", "--ctx", "2048", "--seed", "9", "-o", model] +
                   (["--tokenizer", vocab] if vocab else []), check=True, capture_output=True)
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
            text = text_of(unit, n)
            body = json.dumps({"prompt": text, "max_tokens": 1} if prompt else
                              {"messages": [{"role": "user", "content": text}],
                               "max_tokens": 1}, ensure_ascii=False).encode()
            times = []
            for _ in range(3):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                t0 = time.monotonic()
                c.request("POST", "/v1/completions" if prompt else "/v1/chat/completions", body,
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                doc = json.loads(r.read())
                times.append(time.monotonic() - t0)
                c.close()
            err = doc.get("error", {})
            print("%9d bytes: %d %s, %s s; %s" % (len(text.encode()), r.status, err.get("code"),
                                                  " ".join("%.2f" % t for t in times),
                                                  err.get("message")))
    finally:
        srv.terminate()
        srv.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
