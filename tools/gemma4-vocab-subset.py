#!/usr/bin/env python3
"""Writes tests/data/gemma4-vocab.txt: the part of llama.cpp's
models/ggml-vocab-gemma-4.gguf (15 MB) that tokenizing the test texts of
models/ggml-vocab-gemma-4.gguf.inp can touch, with the token ids unchanged.

Kept: every control, user-defined and byte token; every token whose text is
a substring of a test text's pieces (spaces as U+2581, split into runs of
newlines and runs of other characters: Gemma 4's pre-tokenizer), which
includes every symbol BPE can form on those texts; every merge whose two
parts and result are such substrings, in the original order. A merge with a
part outside that set can never apply to those texts, so the subset gives
the same tokens as the whole vocabulary for them. The other ids are padded
by the test with placeholder texts no input can produce.

Usage: tools/gemma4-vocab-subset.py LLAMA_CPP_DIR > tests/data/gemma4-vocab.txt
No third-party modules (reads the GGUF itself)."""
import hashlib
import struct
import sys

root = sys.argv[1]
path = root + "/models/ggml-vocab-gemma-4.gguf"
data = open(path, "rb").read()
o = 0


def rd(fmt):
    global o
    v = struct.unpack_from("<" + fmt, data, o)
    o += struct.calcsize("<" + fmt)
    return v[0]


def rs():
    global o
    n = rd("Q")
    s = data[o:o + n]
    o += n
    return s


SZ = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def val(t):
    if t == 8:
        return rs()
    if t == 9:
        et = rd("I")
        n = rd("Q")
        return [val(et) for _ in range(n)]
    return rd(SZ[t])


assert rd("I") == 0x46554747
rd("I")
rd("Q")
nkv = rd("Q")
kv = {}
for _ in range(nkv):
    k = rs().decode()
    kv[k] = val(rd("I"))

tokens = kv["tokenizer.ggml.tokens"]
types = kv["tokenizer.ggml.token_type"]
merges = kv["tokenizer.ggml.merges"]
raw = open(path + ".inp", "rb").read()
texts = raw.split(b"\n__ggml_vocab_test__\n")

subs = set()
for t in texts:
    norm = t.replace(b" ", "\u2581".encode())
    i = 0
    while i < len(norm):
        nl = norm[i:i + 1] == b"\n"
        j = i + 1
        while j < len(norm) and (norm[j:j + 1] == b"\n") == nl:
            j += 1
        piece = norm[i:j]
        for a in range(len(piece)):
            for b in range(a + 1, len(piece) + 1):
                subs.add(piece[a:b])
        i = j

keep = [i for i, s in enumerate(tokens) if types[i] in (2, 3, 4, 6) or s in subs]
kept_merges = []
for m in merges:
    sp = m.find(b" ", 1)
    a, b = m[:sp], m[sp + 1:]
    if a in subs and b in subs and a + b in subs:
        kept_merges.append(m)

out = sys.stdout
out.write("# Gemma 4 vocabulary subset for tests/engine/test-tokenizer.c\n")
out.write("# from llama.cpp %s (commit de3ff81), sha256 %s\n"
          % ("models/ggml-vocab-gemma-4.gguf", hashlib.sha256(data).hexdigest()))
out.write("# written by tools/gemma4-vocab-subset.py; lines: n_vocab, special ids,\n")
out.write("# 'T id type hex-text' per kept token, 'M hex-merge' per kept merge in order\n")
out.write("n_vocab %d\n" % len(tokens))
for k in ("bos", "eos", "unknown", "padding", "mask"):
    out.write("%s %d\n" % (k, kv["tokenizer.ggml.%s_token_id" % k]))
for i in keep:
    out.write("T %d %d %s\n" % (i, types[i], tokens[i].hex()))
for m in kept_merges:
    out.write("M %s\n" % m.hex())
