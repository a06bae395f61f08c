#!/usr/bin/env python3
"""Other inputs the server's tern-cli reads (issue 17):

- `tern-cli info` on a GGUF whose metadata holds C1 controls (U+009B is a
  terminal's CSI) prints them escaped (\\u009b), as it does C0 controls, and
  bytes that are not UTF-8 as \\xNN;
- a NUL byte in a line on standard input (`run --chat`, `run --single-turn`)
  is refused with a message, never cut off silently."""

import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
cli = serverlib.env("TERN_CLI")
tmp = serverlib.workdir("inputs")


def gguf_string(s):
    return struct.pack("<Q", len(s)) + s


# A GGUF v3 with no tensors and three string keys.
kvs = [(b"general.name", "evil\u009b31mred\u0085end".encode()),
       (b"general.description", b"tab\there\x9bstray\xffbyte"),
       (b"general.license", "caf\u00e9 \u65e5\u672c".encode())]
blob = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
for k, v in kvs:
    blob += gguf_string(k) + struct.pack("<I", 8) + gguf_string(v)
path = os.path.join(tmp, "c1.gguf")
with open(path, "wb") as f:
    f.write(blob + b"\0" * ((32 - len(blob) % 32) % 32))
r = subprocess.run([cli, "info", path], capture_output=True)
out = r.stdout
check(r.returncode == 0, "info reads the file (%s: %r)" % (r.returncode, r.stderr[-300:]))
check(b"\xc2\x9b" not in out and b"\xc2\x85" not in out,
      "no raw C1 control reaches the terminal: %r" % out)
check(b"\x9b" not in out and b"\xff" not in out, "no stray non-UTF-8 byte either: %r" % out)
check(b"evil\\u009b31mred\\u0085end" in out, "C1 controls printed as \\u009b, \\u0085: %r" % out)
check(b"tab\\x09here\\x9bstray\\xffbyte" in out, "C0 and stray bytes as \\xNN: %r" % out)
check("caf\u00e9 \u65e5\u672c".encode() in out, "other text unchanged: %r" % out)

# A NUL in a line of standard input.
model = serverlib.make_model(tmp)
for args in (["run"], ["run", "--chat"], ["run", "--single-turn", "-s", "Be brief."]):
    r = subprocess.run([cli] + args + ["-m", model, "-n", "2", "-t", "1"],
                       input=b"hello\x00world\n", capture_output=True, timeout=120)
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode != 0 and "NUL" in err,
          "%s: a NUL in an input line is refused (status %s: %s)" %
          (" ".join(args), r.returncode, err.strip()[-300:]))
    r = subprocess.run([cli] + args + ["-m", model, "-n", "2", "-t", "1"],
                       input=b"hello world\n", capture_output=True, timeout=120)
    check(r.returncode == 0, "%s: the same line without NUL is answered (status %s: %s)" %
          (" ".join(args), r.returncode, r.stderr.decode("utf-8", "replace")[-300:]))
checks.finish()
