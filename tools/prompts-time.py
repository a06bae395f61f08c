#!/usr/bin/env python3
"""How long the server takes to answer a /v1/completions request of several
text prompts (docs/SERVER.md, "Several prompts"), for one or more builds of
tern-cli, run alternately (A, B, A, B, ...) so that the machine's load moves
them alike.

usage: prompts-time.py --vocab TOKENIZER_JSON [--arch ARCH] [--prompts N]
                       [--bytes B] [--runs R] [--over I] TERN_CLI...

N prompts (default 64) of B bytes (default 3000) each, random words of a
fixed seed (each prompt its own), max_tokens 1, greedy; R rounds (default
5). A tiny random-weight model of the vocabulary's architecture (--arch,
default llama) with a 2,048-token context, built in a temporary directory
by the first TERN_CLI. Prints each build's times (wall-clock, request to
answer) and their median, and the same less the engine's prefill and
decode time the answer's usage reports (what is left: encoding the
prompts, the answer, HTTP).

--over I: prompt I (from 0) is one over the context by its token count
but not by the tokenizer's bound ("a " 2,100 times, 2,101 tokens): the
request is refused with a 400, and the times are until that answer."""

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("the of and to in is was for on that with as by at from his her an "
         "tern seabird coast wing feather ocean wind harbour island flight "
         "quickly slowly mostly 1984 2026 3.14 don't it's ünïcödé naïve café").split()


def prompts(n, size):
    out = []
    for i in range(n):
        rng = random.Random(i)
        words = []
        length = 0
        while length < size:
            w = rng.choice(WORDS)
            words.append(w)
            length += len(w) + 1
        out.append(" ".join(words)[:size])
    return out


class Server:
    def __init__(self, cli, model, tmp, name):
        self.out = os.path.join(tmp, name + ".out")
        self.proc = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "-t", "1", "-c", "2048",
                                      "--max-body", str(64 << 20)],
                                     stdout=open(self.out, "w"),
                                     stderr=open(os.path.join(tmp, name + ".err"), "w"))
        self.port = None
        deadline = time.time() + 60
        while not self.port and time.time() < deadline and self.proc.poll() is None:
            for line in open(self.out):
                if line.startswith("port "):
                    self.port = int(line.split()[1])
            time.sleep(0.05)
        if not self.port:
            sys.exit("%s: the server did not start" % cli)

    def ask(self, body, status=200):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        t0 = time.time()
        c.request("POST", "/v1/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        dt = time.time() - t0
        c.close()
        if r.status != status:
            sys.exit("answered %d: %r" % (r.status, data[:300]))
        return dt, json.loads(data)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--arch", default="llama")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--bytes", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--over", type=int, default=None)
    ap.add_argument("cli", nargs="+")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="prompts-time.")
    model = os.path.join(tmp, "model.gguf")
    subprocess.run([a.cli[0], "mkmodel", "--arch", a.arch, "--type", "q8_0", "--embd", "64",
                    "--layers", "2", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
                    "--ff", "128", "--ctx", "2048", "--seed", "9", "--tokenizer", a.vocab,
                    "-o", model], check=True, capture_output=True)
    body = {"prompt": prompts(a.prompts, a.bytes), "max_tokens": 1, "temperature": 0}
    if a.over is not None:
        body["prompt"][a.over] = "a " * 2100
    servers = [Server(cli, model, tmp, "s%d" % i) for i, cli in enumerate(a.cli)]
    times = [[] for _ in servers]
    rest = [[] for _ in servers]
    tokens = None
    for _ in range(a.runs):
        for i, s in enumerate(servers):
            if a.over is not None:
                dt, _ = s.ask(body, 400)
                times[i].append(dt)
                rest[i].append(dt)
                continue
            dt, doc = s.ask(body)
            u = doc["usage"]
            tm = u["timings"]
            prefill = tm["prefill_tokens"] / tm["prefill_tok_s"] if tm["prefill_tok_s"] else 0
            decode = u["completion_tokens"] / tm["decode_tok_s"] if tm["decode_tok_s"] else 0
            times[i].append(dt)
            rest[i].append(dt - prefill - decode)
            tokens = u["prompt_tokens"]
    for s in servers:
        s.stop()
    if a.over is not None:
        print("%d prompts of %d bytes, prompt %d over the context: a 400, %d rounds"
              % (a.prompts, a.bytes, a.over, a.runs))
    else:
        print("%d prompts of %d bytes, %s prompt tokens in all, max_tokens 1, %d rounds"
              % (a.prompts, a.bytes, tokens, a.runs))
    for cli, t, r in zip(a.cli, times, rest):
        print("%s: median %.3f s (%s); less prefill and decode: median %.3f s (%s)"
              % (cli, statistics.median(t), ", ".join("%.3f" % x for x in t),
                 statistics.median(r), ", ".join("%.3f" % x for x in r)))


if __name__ == "__main__":
    main()
