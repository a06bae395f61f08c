#!/usr/bin/env python3
"""The AppStream metainfo as software centres read it:
- `appstreamcli validate --strict` passes (appstream: tools/ensure-deps.sh app);
- the newest release is meson's project version, with a date;
- an OARS content rating;
- each screenshot has a caption and is one of data/screenshots/ (real screens
  written by the app's tests), at the repository's raw URL (the homepage's
  repository, main branch), with the width and height of that file.
Usage: test-metainfo.py METAINFO SOURCE_ROOT VERSION
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

metainfo, root, version = sys.argv[1:4]
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


appstreamcli = shutil.which("appstreamcli")
check(appstreamcli is not None, "appstreamcli is installed (Debian: appstream)")
if appstreamcli:
    r = subprocess.run([appstreamcli, "validate", "--strict", "--no-net", "--explain", metainfo],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout.rstrip())
    check(r.returncode == 0, "appstreamcli validate --strict")

tree = ET.parse(metainfo).getroot()
releases = tree.findall("releases/release")
check(len(releases) > 0, "a release")
if releases:
    newest = releases[0]
    check(newest.get("version") == version,
          "the newest release %s is meson's project version %s" % (newest.get("version"), version))
    check(re.fullmatch(r"\d{4}-\d\d-\d\d", newest.get("date", "")) is not None,
          "it has a date (%s)" % newest.get("date"))
rating = tree.find("content_rating")
check(rating is not None and rating.get("type", "").startswith("oars-"), "an OARS content rating")

home = tree.findtext("url[@type='homepage']") or ""
m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", home)
check(m is not None, "the homepage is a GitHub repository (%s)" % home)
raw = "https://raw.githubusercontent.com/%s/%s/main/" % m.groups() if m else None
shots = tree.findall("screenshots/screenshot")
check(len(shots) >= 1, "screenshots")
check(sum(1 for s in shots if s.get("type") == "default") == 1, "one default screenshot")
for s in shots:
    check(bool((s.findtext("caption") or "").strip()), "a caption")
    for img in s.findall("image"):
        url = img.text.strip()
        check(raw is not None and url.startswith(raw + "data/screenshots/"),
              "%s is in the repository's data/screenshots/" % url)
        if raw is None or not url.startswith(raw):
            continue
        path = os.path.join(root, url[len(raw):])
        check(os.path.isfile(path), "%s exists" % os.path.relpath(path, root))
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            head = f.read(24)
        check(head[:8] == b"\x89PNG\r\n\x1a\n", "%s is a PNG" % os.path.basename(path))
        w, h = struct.unpack(">II", head[16:24])
        check((img.get("width"), img.get("height")) == (str(w), str(h)),
              "%s is %sx%s as the metainfo says" % (os.path.basename(path), w, h))

print("%d failed" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
