"""What docs/*.md and README.md show of tern-cli, against its --help.

Every `tern-cli COMMAND ...` the documents show (a usage line, an example,
an inline mention) is read for its options, and each option (`--name`,
`-x`) must be listed by that command's --help: the help of the mode the
line is in (run --remote, run --single-turn, bench --pin, mkmodel --arch
dflash, ...). A document that shows an option the help does not list is a
lie in one of the two (or an option that went away). Each --help must also
exit 0 and write to stdout.

Environment (set by tests/meson.build): TERN_CLI, TERN_SOURCE_ROOT."""

import glob
import os
import re
import subprocess
import sys

CLI = os.environ["TERN_CLI"]
ROOT = os.environ["TERN_SOURCE_ROOT"]
COMMANDS = {"run", "perplexity", "info", "mkmodel", "template", "bench", "bench-vision",
            "tokenize", "detokenize", "list", "pull", "search", "remove", "check", "import",
            "serve", "doctor"}
# Options that select another parser, each with its own --help (and whether
# it takes a value first).
MODES = {
    "run": [("--remote", True), ("--single-turn", False), ("--chat", False)],
    "bench": [("--pin", False), ("--spec", True), ("--sampler", False)],
    "mkmodel": [("--arch", True)],
}
MKMODEL_OWN = {"dflash", "gemma4-assistant", "gemma3-vision", "gemma4-vision"}
OPTION = re.compile(r"--[a-z][a-z0-9-]*|-[a-z]")

helps = {}
failures = []
checked = 0


def help_of(mode):
    if mode not in helps:
        r = subprocess.run([CLI] + list(mode) + ["--help"], capture_output=True, text=True,
                           env=dict(os.environ, LANGUAGE="C", LC_ALL="C"), timeout=60)
        helps[mode] = r
    return helps[mode]


def mode_of(cmd, words):
    mode = [cmd]
    for opt, takes in MODES.get(cmd, []):
        if opt not in words:
            continue
        k = words.index(opt)
        value = words[k + 1] if takes and k + 1 < len(words) else "x"
        if cmd == "mkmodel" and value not in MKMODEL_OWN:
            continue
        mode += [opt, value] if takes else [opt]
        break
    return tuple(mode)


docs = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
for path in docs:
    name = os.path.relpath(path, ROOT)
    # Shell continuations join a command's lines.
    text = re.sub(r"\\\n\s*", " ", open(path, encoding="utf-8").read())
    for n, line in enumerate(text.splitlines(), 1):
        # Up to the end of the code span or the shell command; " | " ends a
        # table cell or a pipe, "a|b" inside an option's value does not.
        for m in re.finditer(r"tern-cli ([a-z][a-z-]*)((?: [^`\n;&>#]*)?)", line):
            cmd = m.group(1)
            if cmd not in COMMANDS:
                continue
            words = re.split(r" \\?\| ", m.group(2))[0].split()
            mode = mode_of(cmd, words)
            r = help_of(mode)
            if r.returncode != 0 and "built without" in r.stderr:
                continue  # run --remote without the manager (the fuzz build)
            if r.returncode != 0 or not r.stdout:
                failures.append("tern-cli %s --help: exit %d, %r"
                                % (" ".join(mode), r.returncode, r.stderr[-200:]))
                continue
            for w in words:
                w = w.strip("[]().,'\"").split("=")[0]
                if not OPTION.fullmatch(w) or w in mode:
                    continue
                checked += 1
                if not re.search(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", r.stdout):
                    failures.append("%s:%d: shows 'tern-cli %s ... %s', which 'tern-cli %s --help' "
                                    "does not list" % (name, n, cmd, w, " ".join(mode)))

# Defaults the help states, against the constants the code uses: each of
# server/tern-server.c's DEFAULT_* values that serve --help describes must
# appear in it (a default that depends on the model, such as the body
# limit with images, must say so).
src = open(os.path.join(ROOT, "server", "tern-server.c"), encoding="utf-8").read()
serve = help_of(("serve",))
serve_help = serve.stdout
DEFAULTS = ("DEFAULT_QUEUE_MAX", "DEFAULT_BODY_MAX", "DEFAULT_BODY_MAX_VISION", "DEFAULT_PINS",
            "DEFAULT_REQUEST_TIMEOUT_S")
without_server = serve.returncode != 0 and "built without" in serve.stderr
for name in () if without_server else DEFAULTS:
    m = re.search(r"^#define %s \(?([0-9 *]+)\)?$" % name, src, re.M)
    if not m:
        failures.append("server/tern-server.c: no #define %s as a number" % name)
        continue
    value = 1
    for factor in m.group(1).split("*"):
        value *= int(factor)
    checked += 1
    if not re.search(r"(?<![\w.])%d(?![\w.])" % value, serve_help):
        failures.append("serve --help does not state %s, %d" % (name, value))

# What a new user reads first: each command's --help says more than its
# usage line (info's was that line alone, --no-tensors unexplained), and
# names every mode of the command that has its own --help (bench --help
# named --sampler, never --pin or --spec).
for cmd in sorted(COMMANDS):
    r = help_of((cmd,))
    if r.returncode != 0 and "built without" in r.stderr:
        continue
    checked += 1
    if len([l for l in r.stdout.splitlines() if l.strip()]) < 2:
        failures.append("tern-cli %s --help is its usage line alone: %r" % (cmd, r.stdout))
    for opt, _ in MODES.get(cmd, []) if cmd != "mkmodel" else []:
        checked += 1
        if not re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", r.stdout):
            failures.append("tern-cli %s --help does not name its mode %s" % (cmd, opt))

# Every --help fits a terminal of 80 columns: template's list of kinds was
# one line of 130, which a terminal breaks mid-word. Each command and each
# mode with its own help.
ALL_MODES = [(cmd,) for cmd in sorted(COMMANDS)] + [("run", "--remote", "x"),
    ("run", "--single-turn"), ("run", "--chat"), ("bench", "--pin"), ("bench", "--spec", "x"),
    ("bench", "--sampler")] + [("mkmodel", "--arch", a) for a in sorted(MKMODEL_OWN)]
for mode in ALL_MODES:
    r = help_of(mode)
    if r.returncode != 0:
        continue  # said above, or a mode this build lacks
    for line in r.stdout.splitlines():
        checked += 1
        if len(line) > 80:
            failures.append("tern-cli %s --help: a line of %d columns: %r"
                            % (" ".join(mode), len(line), line))

# mkmodel's options are each explained, not only listed in its usage.
mk = help_of(("mkmodel",)).stdout
for opt in ("--logit-scale", "--row-pool", "-t", "--vocab-size", "--name", "--seed"):
    checked += 1
    if not re.search(r"^\s+" + re.escape(opt) + r"(?![\w-])", mk, re.M):
        failures.append("tern-cli mkmodel --help does not explain %s (no line that starts "
                        "with it)" % opt)

for f in sorted(set(failures)):
    print("FAIL:", f, file=sys.stderr)
print("cli-help: %d options checked in %d documents, %d --help texts, %d failed"
      % (checked, len(docs), len(helps), len(set(failures))))
if checked < 100:
    print("FAIL: only %d options found in the documents: the parsing is broken" % checked,
          file=sys.stderr)
    sys.exit(1)
sys.exit(1 if failures else 0)
