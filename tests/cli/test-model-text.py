"""Text from a model file never drives the terminal (docs/TOKENIZER.md,
docs/CHAT-TEMPLATES.md).

A downloaded GGUF is untrusted: its token texts and its chat template can
hold escape sequences (OSC 52 writes the clipboard, CSI 2J erases the
screen, a lone CR overwrites the line). tokenize --pieces, detokenize and
template print token texts; info prints the metadata. On a terminal
(script(1)'s pseudo-terminal, TERM=dumb so that tern-cli writes no
sequence of its own) each shows them escaped, as run shows an answer; to a
pipe tokenize, detokenize and template write the exact bytes.

The model is tern-cli mkmodel's tiny one with its metadata rewritten here:
the BOS token and one ordinary token get a hostile text, the chat template
an OSC sequence. No tensors: these commands read the tokenizer only.

Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP."""

import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

CLI = os.environ["TERN_CLI"]
failures = 0


def check(ok, what):
    global failures
    if ok:
        print("ok: " + what.split(":")[0])
    else:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)


# GGUF value types (gguf.md) and the struct format of the fixed-size ones.
STRING, ARRAY = 8, 9
FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
         12: "d"}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.at)[0]
        self.at += struct.calcsize("<" + fmt)
        return v

    def string(self):
        n = self.take("Q")
        self.at += n
        return self.data[self.at - n:self.at]

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(FIXED[t])


def pack_string(s):
    return struct.pack("<Q", len(s)) + s


def pack_value(t, v):
    if t == STRING:
        return pack_string(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(pack_value(et, x) for x in items)
    return struct.pack("<" + FIXED[t], v)


def read_kvs(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    if r.data[:4] != b"GGUF":
        sys.exit("%s is not a GGUF" % path)
    r.at = 4
    _version, _n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    kvs = []
    for _ in range(n_kv):
        key = r.string()
        t = r.take("I")
        kvs.append([key, t, r.value(t)])
    return kvs


def write_kvs(path, kvs):
    blob = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, t, v in kvs:
        blob += pack_string(key) + struct.pack("<I", t) + pack_value(t, v)
    with open(path, "wb") as f:
        f.write(blob + b"\0" * ((32 - len(blob) % 32) % 32))


def raw_run(args, terminal):
    """tern-cli's bytes: its stdout on a pipe, or (terminal) all that a
    terminal gets from it, script(1)'s pseudo-terminal on stdout and
    stderr."""
    e = dict(os.environ, LANGUAGE="C", LC_ALL="C", TERM="dumb")
    argv = [CLI] + args
    if terminal:
        argv = ["script", "-qec", " ".join(shlex.quote(a) for a in argv), "/dev/null"]
    r = subprocess.run(argv, capture_output=True, env=e, timeout=120, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def on_screen(out):
    """What script(1) recorded, each line's end as a newline (the
    pseudo-terminal writes a newline as CR LF); None when a byte would
    drive the terminal: a control but newline and tab, a CR that no LF
    follows, DEL, a C1 control (U+009B is CSI)."""
    text = re.sub(b"\r+\n", b"\n", out)
    bad = [c for c in text if (c < 0x20 and c not in (0x0a, 0x09)) or c == 0x7f]
    c1 = re.search(b"\xc2[\x80-\x9f]", text)
    return None if bad or c1 else text


base = os.environ.get("TERN_TEST_TMP") or tempfile.gettempdir()
os.makedirs(base, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="model-text.", dir=base)
try:
    tiny = os.path.join(tmp, "tiny.gguf")
    r = subprocess.run([CLI, "mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                        "--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
                        "--ff", "64", "-o", tiny], capture_output=True)
    if r.returncode != 0:
        sys.exit("mkmodel failed: %r" % r.stderr)
    kvs = read_kvs(tiny)
    kv = {e[0]: e for e in kvs}

    # ESC ] 52 (clipboard) ended by BEL, CSI 2J (erase the screen), a lone
    # CR, C1 CSI (U+009B) and DEL.
    BOS_TEXT = "<s\x1b]52;c;SGVsbG8=\x07>".encode()
    WORD_TEXT = "A\x1b[2JB\rC\u009b31mD\x7fE".encode()
    BOS_SHOWN = b"<s\\x1b]52;c;SGVsbG8=\\x07>"
    WORD_SHOWN = b"A\\x1b[2JB\\x0dC\\u009b31mD\\x7fE"
    TEMPLATE = "\x1b]52;c;SGVsbG8=\x07{{ bos_token }}<|im_start|>".encode()

    tokens = kv[b"tokenizer.ggml.tokens"][2][1]
    bos = kv[b"tokenizer.ggml.bos_token_id"][2]
    # An ordinary token: printable ASCII, not a control or byte token.
    word = next(i for i, t in enumerate(tokens) if len(t) == 2 and t.isalpha())
    tokens[bos] = BOS_TEXT
    tokens[word] = WORD_TEXT
    if b"tokenizer.chat_template" in kv:
        kv[b"tokenizer.chat_template"][2] = TEMPLATE
    else:
        kvs.append([b"tokenizer.chat_template", STRING, TEMPLATE])
    model = os.path.join(tmp, "hostile.gguf")
    write_kvs(model, kvs)

    cases = [
        ("tokenize --pieces", ["tokenize", "-m", model, "--bos", "--pieces", "hi"],
         b"%d\t%s\n" % (bos, BOS_TEXT), b"%d\t%s\n" % (bos, BOS_SHOWN)),
        ("detokenize", ["detokenize", "-m", model, str(word)], WORD_TEXT, WORD_SHOWN),
        ("detokenize --special", ["detokenize", "-m", model, "--special", str(bos), str(word)],
         BOS_TEXT + WORD_TEXT, BOS_SHOWN + WORD_SHOWN),
        ("template", ["template", "-m", model, "--kind", "gemma3", "--user", "hi"],
         BOS_TEXT, BOS_SHOWN),
    ]
    for name, args, raw, shown in cases:
        rc, out, err = raw_run(args, False)
        check(rc == 0 and out.startswith(raw),
              "%s: to a pipe the model's bytes are exact: rc %d %r %r" % (name, rc, out, err))
        if not shutil.which("script"):
            continue
        rc, out, err = raw_run(args, True)
        text = on_screen(out)
        check(rc == 0 and text is not None and shown in text,
              "%s: on a terminal the model's controls show escaped: rc %d %r" % (name, rc, out))

    # detokenize --help promises what the cases above see: exact bytes to a
    # pipe, controls escaped on a terminal, control tokens only with
    # --special (it said "exactly" for all of it).
    r = subprocess.run([CLI, "detokenize", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, LANGUAGE="C", LC_ALL="C"))
    helptext = " ".join(r.stdout.split())
    check(r.returncode == 0 and "exact" in helptext and "pipe" in helptext and
          "terminal" in helptext and "--special" in helptext,
          "detokenize --help says where its output is exact: %r" % r.stdout)

    if shutil.which("script"):
        # The chat template is read to recognise it, never printed; info
        # shows it escaped.
        for name, args in (("template (recognised)", ["template", "-m", model, "--user", "hi"]),
                           ("info", ["info", model])):
            rc, out, err = raw_run(args, True)
            check(rc == 0 and on_screen(out) is not None,
                  "%s: no control of the model reaches the terminal: rc %d %r" % (name, rc, out))
        rc, out, err = raw_run(["info", model], True)
        check(b"\\x1b]52;c;SGVsbG8=\\x07{{ bos_token }}" in out,
              "info shows the template escaped: %r" % out)

    # general.name: run's chat and bench print the model's description,
    # which starts with it (docs/MODEL.md): one line, its controls escaped,
    # to a terminal and a pipe alike.
    named = os.path.join(tmp, "named.gguf")
    r = subprocess.run([CLI, "mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                        "--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
                        "--ff", "64", "--name", "N\x1b]0;title\x07M\rO\u009bP\nQ", "-o", named],
                       capture_output=True)
    if r.returncode != 0:
        sys.exit("mkmodel --name failed: %r" % r.stderr)
    NAME_SHOWN = b"N\\x1b]0;title\\x07M\\x0dO\\u009bP\\x0aQ ("
    for name, args in (("run (chat)", ["run", "-m", named, "-n", "1", "-t", "1"]),
                       ("bench", ["bench", "-m", named, "-p", "4", "-n", "2", "-r", "1", "-t", "1",
                                  "--verify", "0"])):
        for terminal in (False, True):
            if terminal and not shutil.which("script"):
                continue
            rc, out, err = raw_run(args, terminal)
            shown = out + err
            text = on_screen(shown) if terminal else shown
            check(rc == 0 and text is not None and NAME_SHOWN in text and
                  b"\x1b" not in shown,
                  "%s: the model's name shows escaped (%s): rc %d %r" %
                  (name, "terminal" if terminal else "pipe", rc, shown[-600:]))

    # Bidi controls and invisible characters in a name ("Trojan Source"):
    # U+202E shows the rest of the line backwards, U+2066 isolates it,
    # U+200B and U+FEFF hide between letters, a tag character carries
    # hidden ASCII. Each shows as its escape wherever the name is one line
    # (run, info, an error's quoted path); raw, none reaches the output.
    HIDDEN = "adm\u202egpj.exe\u2066x\u200by\ufeffz\U000e0041!"
    HIDDEN_SHOWN = b"adm\\u202egpj.exe\\u2066x\\u200by\\ufeffz\\U000e0041!"
    RAW = [c.encode() for c in "\u202e\u2066\u200b\ufeff\U000e0041"]
    bidi = os.path.join(tmp, "bidi.gguf")
    r = subprocess.run([CLI, "mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                        "--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
                        "--ff", "64", "--name", HIDDEN, "-o", bidi], capture_output=True)
    if r.returncode != 0:
        sys.exit("mkmodel --name failed: %r" % r.stderr)
    missing = os.path.join(tmp, "no\u202eeno.gguf")
    for name, args in (("run (chat), hidden", ["run", "-m", bidi, "-n", "1", "-t", "1"]),
                       ("info, hidden", ["info", "--no-tensors", bidi]),
                       ("an error's path, hidden", ["info", missing])):
        rc, out, err = raw_run(args, False)
        shown = out + err
        want = HIDDEN_SHOWN if "error" not in name else \
            os.path.join(tmp, "no\\u202eeno.gguf").encode()
        check(rc == (2 if "error" in name else 0) and want in shown and
              not any(c in shown for c in RAW),
              "%s: bidi and invisible characters show escaped: rc %d %r" %
              (name, rc, shown[-600:]))

    # info's first line names the file as typed: a path holding U+202E, a
    # zero-width space or ESC was printed raw there (an error naming the
    # same path showed it escaped, as run does).
    odd = os.path.join(tmp, "we\u202eird\u200b\x1b[2J.gguf")
    shutil.copyfile(bidi, odd)
    for terminal in (False, True) if shutil.which("script") else (False,):
        rc, out, err = raw_run(["info", "--no-tensors", odd], terminal)
        first = out.split(b"\n", 1)[0]
        want = os.path.join(tmp, "we\\u202eird\\u200b\\x1b[2J.gguf").encode()
        check(rc == 0 and first.startswith(want + b": GGUF v") and
              not any(c in first for c in RAW + [b"\x1b"]),
              "info's header shows the path's hidden characters escaped (%s): rc %d %r" %
              ("terminal" if terminal else "pipe", rc, first[-300:]))

    # --json: a name (the file's) or a path with a quote or a backslash is
    # still one JSON string, read back as it is.
    quoted = os.path.join(tmp, 'q"uo\\te.gguf')
    r = subprocess.run([CLI, "mkmodel", "--arch", "llama", "--type", "f32", "--embd", "32",
                        "--layers", "1", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
                        "--ff", "64", "--name", 'say "hi" \\o/', "-o", quoted],
                       capture_output=True)
    if r.returncode != 0:
        sys.exit("mkmodel failed: %r" % r.stderr)
    for name, args, want in (
            ("bench --pin --json", ["bench", "--pin", "-m", quoted, "--short", "10", "--long", "100",
                                    "-c", "256", "-n", "2", "-r", "1", "-t", "1", "--json"],
             'say "hi" \\o/'),
            ("bench --json", ["bench", "-m", quoted, "-p", "4", "-n", "2", "-r", "1", "-t", "1",
                              "--verify", "0", "--json"], quoted)):
        rc, out, err = raw_run(args, False)
        try:
            got = json.loads(out)["model"]
        except (ValueError, KeyError) as e:
            got = "not JSON: %s" % e
        check(rc == 0 and got == want, "%s: the model is a JSON string: rc %d %r %r" %
              (name, rc, got, out[:200]))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print("%s" % ("all passed" if failures == 0 else "%d failed" % failures))
sys.exit(1 if failures else 0)
