"""Hostile values of tern-cli's numeric options.

Every numeric option of run (and its --single-turn and --remote modes),
perplexity, bench (and --pin, --spec, --sampler, --kernels), serve,
tokenize and mkmodel's --logit-scale gets 0, -1, 1e400, nan, inf, a
number past 64 bits, "12abc", "", " 5" and 0x10. A value the option does
not take must end tern-cli with status 1 and one line on stderr that names
the option and what it takes (a range: two numbers, or a word list);
never a crash, a sanitizer report, a hang or a value clamped or read as
something else. The model named is an existing file that is no GGUF: a
value the option takes gets as far as loading it (status 2), so nothing
runs.

A context far beyond the model's (--ctx 1073741824, run's limit) and
--threads 100000 on a real tiny model: a one-line error or a run that
ends, never an allocation of terabytes.

Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

CLI = os.environ["TERN_CLI"]
failures = 0
checks = 0

VALUES = ["0", "-1", "1e400", "nan", "inf", "99999999999999999999", "12abc", "", " 5", "0x10"]


def fail(what):
    global failures
    failures += 1
    print("FAIL: " + what, file=sys.stderr)


def run(argv, timeout=60):
    e = dict(os.environ, LANGUAGE="C", LC_ALL="C")
    try:
        r = subprocess.run([CLI] + argv, capture_output=True, env=e, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, b"", b""
    return r.returncode, r.stdout, r.stderr


def sanitizer(err):
    return b"Sanitizer" in err or b"runtime error" in err or b"LeakSanitizer" in err


def range_of(line):
    """What the message says the option takes: two numbers (a range) or
    "non-negative"/"on or off" words."""
    return len(re.findall(rb"-?\d+(?:\.\d+)?", line)) >= 2 or b"non-negative" in line


base = os.environ.get("TERN_TEST_TMP") or tempfile.gettempdir()
os.makedirs(base, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="option-values.", dir=base)
try:
    bad = os.path.join(tmp, "not-a-model.gguf")
    with open(bad, "wb") as f:
        f.write(b"not a model at all, just text\n")
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write("a few words to measure\n" * 4)
    image = os.path.join(tmp, "no-image.png")
    with open(image, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")

    # (mode, the command up to the option, its numeric options)
    cases = [
        ("run", ["run", "-m", bad, "-p", "hi"],
         ["-n", "--n-predict", "-c", "--ctx", "-t", "--threads", "--temp", "--top-k", "--top-p",
          "--min-p", "--repeat-penalty", "--seed"]),
        ("run --spec", ["run", "-m", bad, "-p", "hi", "--spec", "lookup"], ["--draft-max"]),
        ("run --image", ["run", "-m", bad, "-p", "hi", "--image", image], ["--image-tokens"]),
        ("run --single-turn", ["run", "--single-turn", "-m", bad, "-p", "hi"],
         ["-n", "--max-tokens", "-c", "--ctx", "-t", "--threads", "--temp", "--top-p", "--top-k",
          "--seed"]),
        ("run --remote", ["run", "--remote", "http://127.0.0.1:9/v1", "-p", "hi"],
         ["-n", "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--seed"]),
        ("perplexity", ["perplexity", "-m", bad, "-f", text],
         ["-c", "--ctx", "--chunks", "-t", "--threads"]),
        ("bench", ["bench", "-m", bad], ["-p", "-n", "--verify", "-t", "-r"]),
        ("bench --pin", ["bench", "--pin", "-m", bad],
         ["--short", "--long", "--request", "-n", "-c", "-t", "-r"]),
        ("bench --spec", ["bench", "--spec", "lookup", "-m", bad],
         ["-p", "-n", "-t", "-r", "--draft-max", "--blocks"]),
        ("bench --sampler", ["bench", "--sampler", "-m", bad], ["-n", "-t", "-r"]),
        # --batch is --kernels' own; every value here is refused before any runs.
        ("bench --kernels", ["bench", "--kernels", "--types", "f32", "--shapes", "64x64"],
         ["--batch"]),
        ("serve", ["serve", "-m", bad],
         ["--port", "-c", "--ctx", "-t", "--threads", "--queue", "--max-body", "--pins",
          "--request-timeout", "--pin-cache-max", "--debug-token-delay"]),
        ("tokenize --bench", ["tokenize", "-m", bad, "--bench", text], ["--seconds"]),
    ]
    remote = run(["run", "--remote", "http://127.0.0.1:9/v1", "--help"])
    for mode, prefix, options in cases:
        if mode == "run --remote" and remote[0] != 0:
            continue  # built without the model manager (the fuzz build)
        if mode == "serve" and run(["serve", "--help"])[0] != 0:
            continue
        for opt in options:
            for value in VALUES:
                checks += 1
                argv = prefix + [opt, value]
                rc, out, err = run(argv)
                what = "%s %s %r" % (mode, opt, value)
                lines = err.strip().splitlines()
                if rc is None:
                    fail("%s: hangs" % what)
                elif sanitizer(err) or rc < 0:
                    fail("%s: crashes: rc %d %r" % (what, rc, err[-400:]))
                elif rc == 1:
                    # Refused: one line naming the option and what it takes.
                    if len(lines) != 1 or opt.encode() not in lines[0] or \
                            not range_of(lines[0]):
                        fail("%s: not one line naming the option and its range: %r" %
                             (what, err))
                elif value in ("0", "-1") and rc in (2, 3):
                    pass  # taken, then the model failed to load
                else:
                    fail("%s: taken (rc %d), not refused: %r" % (what, rc, err[-300:]))

    # mkmodel's dimensions (a model it writes, so only values it refuses).
    for opt in ("--layers", "--ctx", "--embd"):
        for value in (" 5", "99999999999999999999", "12abc", ""):
            checks += 1
            rc, out, err = run(["mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                                "--layers", "1", "--heads", "2", "--kv-heads", "1",
                                "--head-dim", "16", "--ff", "64", opt, value,
                                "-o", os.path.join(tmp, "mk.gguf")])
            lines = err.strip().splitlines()
            if rc != 1 or len(lines) != 1 or opt.encode() not in lines[0]:
                fail("mkmodel %s %r: rc %s %r" % (opt, value, rc, err[-300:]))

    # --logit-scale is a decimal number in its range too: strtof took "0x10"
    # (16), "inf" and "nan" (which the engine then refused without naming
    # the option), and " 5".
    for value in VALUES + ["1000", "1e3", "0.0001"]:
        checks += 1
        rc, out, err = run(["mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                            "--layers", "1", "--heads", "2", "--kv-heads", "1",
                            "--head-dim", "16", "--ff", "64", "--logit-scale", value,
                            "-o", os.path.join(tmp, "mk.gguf")])
        lines = err.strip().splitlines()
        if rc != 1 or len(lines) != 1 or b"--logit-scale" not in lines[0] or \
                not range_of(lines[0]):
            fail("mkmodel --logit-scale %r: rc %s %r" % (value, rc, err[-300:]))
    checks += 1
    rc, out, err = run(["mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                        "--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
                        "--ff", "64", "--logit-scale", "2.5", "-o", os.path.join(tmp, "mk.gguf")])
    if rc != 0:
        fail("mkmodel --logit-scale 2.5: rc %s %r" % (rc, err[-300:]))

    # The options only --kernels reads, without it: they were dropped
    # without a word (--batch 8 gave the model's figures). Refused, naming
    # the option and --kernels, before any model is read.
    for opt, value in (("--batch", "8"), ("--types", "f32"), ("--shapes", "64x64"),
                       ("--isa", "scalar")):
        checks += 1
        rc, out, err = run(["bench", "-m", bad, opt, value])
        lines = err.strip().splitlines()
        if rc != 1 or len(lines) != 1 or opt.encode() not in lines[0] or \
                b"--kernels" not in lines[0]:
            fail("bench %s %s without --kernels: rc %s %r" % (opt, value, rc, err[-300:]))
    # More --isa families than there are: it ended with status 1 and no word.
    checks += 1
    rc, out, err = run(["bench", "--kernels", "--types", "f32", "--shapes", "64x64", "--batch",
                        "1", "--isa", "scalar,scalar,scalar,scalar,scalar,scalar,scalar,scalar,"
                        "scalar,scalar,scalar,scalar,scalar,scalar,scalar,scalar,scalar"])
    lines = err.strip().splitlines()
    if rc != 1 or len(lines) != 1 or b"--isa" not in lines[0] or not range_of(lines[0]):
        fail("bench --kernels --isa with 17 families: rc %s %r" % (rc, err[-300:]))

    # --pin-cache that is no directory: a regular file, a FIFO, /dev/null, a
    # path under a file, or nothing. serve took it, and every request then
    # warned "Not a directory"; run --single-turn took it until the same
    # check (cli_pin_cache_check) refused it there too. Refused, naming the
    # option and the path, in the same words but for the command's name; a
    # missing directory is taken (made at the first snapshot).
    if run(["serve", "--help"])[0] == 0:
        fifo = os.path.join(tmp, "pins.fifo")
        os.mkfifo(fifo)
        # A symbolic link to itself and one to a path that cannot be made:
        # there, and never a directory (each was taken, and every pinned
        # request warned "Too many levels of symbolic links" or "No such
        # file or directory").
        loop = os.path.join(tmp, "pins.loop")
        os.symlink("pins.loop", loop)
        dangling = os.path.join(tmp, "pins.dangling")
        os.symlink(os.path.join(tmp, "absent", "pins"), dangling)
        said = {}
        for cmd in (["serve"], ["run", "--single-turn"]):
            for value in (text, fifo, "/dev/null", os.path.join(text, "pins"), loop,
                          dangling, ""):
                checks += 1
                rc, out, err = run(cmd + ["-m", bad, "-p", "hi", "--pin-cache", value]
                                   if cmd[0] == "run" else
                                   cmd + ["-m", bad, "--pin-cache", value])
                lines = err.strip().splitlines()
                if rc != 1 or len(lines) != 1 or b"--pin-cache" not in lines[0] or \
                        (value and (value.encode() not in lines[0] or
                                    b"not a directory" not in lines[0])):
                    fail("%s --pin-cache %r: rc %s %r" % (" ".join(cmd), value, rc, err[-300:]))
                elif lines:
                    said.setdefault(value, []).append(
                        lines[0].replace(cmd[0].encode() + b":", b"CMD:", 1))
            for value in (tmp, os.path.join(tmp, "new", "pins")):
                checks += 1
                rc, out, err = run(cmd + ["-m", bad, "-p", "hi", "--pin-cache", value]
                                   if cmd[0] == "run" else
                                   cmd + ["-m", bad, "--pin-cache", value])
                if rc != 2:
                    fail("%s --pin-cache %s (a directory, or one to make): rc %s %r" %
                         (" ".join(cmd), value, rc, err[-300:]))
        for value, lines in said.items():
            checks += 1
            if len(lines) != 2 or lines[0] != lines[1]:
                fail("serve and run --single-turn say --pin-cache %r differently: %r" %
                     (value, lines))

    # A real model: a context of 2^30 tokens and 100000 threads.
    tiny = os.path.join(tmp, "tiny.gguf")
    r = subprocess.run([CLI, "mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                        "--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
                        "--ff", "64", "-o", tiny], capture_output=True)
    if r.returncode != 0:
        sys.exit("mkmodel failed: %r" % r.stderr)
    for what, argv in (
            ("run --ctx 2^30", ["run", "-m", tiny, "-p", "hi", "-n", "1", "--ctx", "1073741824"]),
            ("run --single-turn --ctx 2^22", ["run", "--single-turn", "-m", tiny, "-p", "hi",
                                              "-n", "1", "--ctx", "4194304"]),
            ("perplexity --ctx 2^20", ["perplexity", "-m", tiny, "-f", text, "-c", "1048576"]),
            ("run --threads 100000", ["run", "-m", tiny, "-p", "hi", "-n", "1", "-t", "100000"]),
            # The smallest prompt and answer it takes, under its default
            # blocks (up to 16 rows): each verify step decodes rows the
            # prompt and answer must hold.
            ("bench --spec -p 1 -n 2", ["bench", "--spec", "lookup", "-m", tiny, "-p", "1",
                                        "-n", "2", "-r", "1", "-t", "1"])):
        checks += 1
        rc, out, err = run(argv, timeout=120)
        lines = err.strip().splitlines()
        if rc is None:
            fail("%s: hangs" % what)
        elif sanitizer(err) or rc < 0:
            fail("%s: crashes: rc %d %r" % (what, rc, err[-400:]))
        elif rc not in (0, 1, 2):
            fail("%s: rc %d %r" % (what, rc, err[-400:]))
        elif rc != 0 and not (lines and lines[-1].startswith(b"tern-cli: ") and
                              any(w in lines[-1] for w in (b"--ctx", b"context", b"-t "))):
            fail("%s: not one line saying why: rc %d %r" % (what, rc, err[-400:]))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("%d option values checked, %d failed" % (checks, failures))
sys.exit(1 if failures else 0)
