#!/usr/bin/env python3
"""Every JSON text Tern writes with json-glib is made strict: json-glib 1.6
writes U+001F raw, which strict readers refuse, so each
json_generator_to_data() in app/, cli/, manager/ and server/ must be the
argument of tn_json_escape_unit_separators() (engine/include/tern.h).
`tern-cli list --json` was one that was not (tests/cli/test-list-json.py).
json_generator_to_file and _to_stream would write the text unescaped: none
may be used.

usage: check-json-writers.py SOURCE_ROOT"""
import os
import re
import sys

root = sys.argv[1]
call = re.compile(r"json_generator_to_(data|file|stream|gstring)\s*\(")
wrapped = re.compile(r"tn_json_escape_unit_separators\s*\(\s*json_generator_to_data\s*\(")
sites, bad = 0, []
for part in ("app", "cli", "manager", "server"):
    for dirpath, _, files in os.walk(os.path.join(root, part)):
        for name in sorted(files):
            if not name.endswith(".c"):
                continue
            path = os.path.join(dirpath, name)
            text = open(path, encoding="utf-8").read()
            ok = {m.end() for m in wrapped.finditer(text)}
            for m in call.finditer(text):
                sites += 1
                if m.end() not in ok:
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append("%s:%d" % (os.path.relpath(path, root), line))
for b in bad:
    print("FAIL: %s: json-glib's text not passed through tn_json_escape_unit_separators" % b)
print("json-writers: %d writers, %d unescaped" % (sites, len(bad)))
sys.exit(1 if bad or sites == 0 else 0)
