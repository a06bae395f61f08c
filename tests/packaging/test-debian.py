#!/usr/bin/env python3
"""packaging/debian/, checked offline: the files dpkg-buildpackage needs, the
package version's upstream part equal to meson's project version, and the
build's test step off (the test suite needs the npm registry). The package is
built and installed by packaging/check-deb.sh (a release check: root, Debian's
mirror, minutes).
Usage: test-debian.py SOURCE_ROOT
"""
import os
import re
import sys

root = sys.argv[1]
deb = os.path.join(root, "packaging", "debian")
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def read(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


for name in ("control", "rules", "changelog", "copyright", "source/format"):
    check(os.path.isfile(os.path.join(deb, name)), "packaging/debian/" + name)
check(os.access(os.path.join(deb, "rules"), os.X_OK), "debian/rules is executable")

version = re.search(r"^\s*version: '([^']+)'", read(root, "meson.build"), re.M).group(1)
first = read(deb, "changelog").splitlines()[0]
m = re.match(r"tern \(([^)]+)\)", first)
deb_version = m.group(1) if m else ""
check(deb_version.rsplit("-", 1)[0] == version,
      "changelog's %s is meson's project version %s" % (deb_version, version))
rules = read(deb, "rules")
check("override_dh_auto_test:" in rules, "the package build runs no tests (no npm there)")
check("-Dvocab_dir=" in rules, "the package build needs no vocabularies")
control = read(deb, "control")
# Each library meson looks up with dependency() has its -dev package.
for pc, pkg in (("gtk4", "libgtk-4-dev"), ("libadwaita-1", "libadwaita-1-dev"),
                ("json-glib-1.0", "libjson-glib-dev"), ("libsoup-3.0", "libsoup-3.0-dev"),
                ("glib-2.0", "libglib2.0-dev"), ("gdk-pixbuf-2.0", "libgdk-pixbuf-2.0-dev")):
    check(pkg in control, "Build-Depends has %s (%s)" % (pkg, pc))
for lib in ("libcmark-gfm-dev", "libcmark-gfm-extensions-dev"):
    check(lib in control, "Build-Depends has " + lib)
# gnome.post_install looks these programs up when meson configures.
for prog, pkg in (("update-desktop-database", "desktop-file-utils"),
                  ("update-mime-database", "shared-mime-info"),
                  ("gtk-update-icon-cache", "gtk-update-icon-cache")):
    check(pkg in control, "Build-Depends has %s (%s, for gnome.post_install)" % (pkg, prog))

print("%d failed" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
