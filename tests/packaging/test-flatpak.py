#!/usr/bin/env python3
"""The Flatpak manifest (packaging/flatpak/), checked offline.

No flatpak-builder run is possible where Tern is tested (no network to
Flathub), so this checks what can be checked without one:
- it parses, on the GNOME runtime, with the app id of the desktop file, the
  metainfo, the GSettings schema and the icons, and the command that meson
  installs and the desktop file runs;
- every local file or folder it names exists; every remote source is pinned
  (a sha256, or a git commit);
- the sandbox has what the app needs (network, the NPU's /dev/accel) and no
  write access outside its own folders;
- each -D option given to meson exists, and the libraries data/meson.build
  looks for that the runtime lacks (cmark-gfm) are built by a module.
Usage: test-flatpak.py SOURCE_ROOT
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TERN_SOURCE_ROOT", ".")
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def read(*parts):
    with open(os.path.join(root, *parts), encoding="utf-8") as f:
        return f.read()


manifest_dir = os.path.join(root, "packaging", "flatpak")
names = [n for n in os.listdir(manifest_dir) if n.endswith((".json", ".yml", ".yaml"))]
check(len(names) == 1, "one manifest in packaging/flatpak/ (%s)" % ", ".join(names))
manifest_name = names[0]
with open(os.path.join(manifest_dir, manifest_name), encoding="utf-8") as f:
    m = json.load(f)
app_id = m.get("id") or m.get("app-id")
check(manifest_name == app_id + ".json", "the manifest is named after its id %s" % app_id)

# ------------------------------------------------------------ one app id
data_meson = read("data", "meson.build")
meson_id = re.search(r"^app_id = '([^']+)'", data_meson, re.M)
check(meson_id is not None and meson_id.group(1) == app_id,
      "data/meson.build's app_id is %s" % app_id)
desktop_name = app_id + ".desktop.in"
check(os.path.isfile(os.path.join(root, "data", desktop_name)), "data/" + desktop_name)
desktop = dict(l.split("=", 1) for l in read("data", desktop_name).splitlines()
               if "=" in l and not l.startswith("#"))
check(desktop.get("Icon") == app_id, "the desktop file's Icon is %s" % app_id)
meta = ET.fromstring(read("data", app_id + ".metainfo.xml.in"))
check(meta.findtext("id") == app_id, "the metainfo's id is %s" % app_id)
launchable = meta.find("launchable[@type='desktop-id']")
check(launchable is not None and launchable.text == app_id + ".desktop",
      "the metainfo launches %s.desktop" % app_id)
schema = ET.fromstring(read("data", app_id + ".gschema.xml"))
check(any(s.get("id") == app_id for s in schema.iter("schema")),
      "the GSettings schema's id is %s" % app_id)
for icon in ("icons/hicolor/scalable/apps/%s.svg" % app_id,
             "icons/hicolor/symbolic/apps/%s-symbolic.svg" % app_id):
    check(os.path.isfile(os.path.join(root, "data", icon)), "data/" + icon)
# Flatpak exports only files named after the app id: everything data/
# installs into share/ must be.
for expr in re.findall(r"install_data\(([^,\n]+)", data_meson):
    # 'icons/.../' + app_id + '.svg': quoted parts and app_id, joined by +.
    parts = [p.strip() for p in expr.split("+")]
    name = "".join(app_id if p == "app_id" else p.strip("'") for p in parts)
    check(os.path.basename(name).startswith(app_id),
          "data/ installs %s, named after the app id" % os.path.basename(name))

# ---------------------------------------------------------- the command
command = m.get("command")
exec_word = desktop.get("Exec", "").split()[0] if desktop.get("Exec") else None
check(command == exec_word, "command '%s' is the desktop file's Exec (%s)" % (command, exec_word))
check(re.search(r"executable\('%s'" % re.escape(command or "?"), read("app", "meson.build"))
      is not None, "app/meson.build installs the executable '%s'" % command)

# ---------------------------------------------------------- the runtime
check(m.get("runtime") == "org.gnome.Platform" and m.get("sdk") == "org.gnome.Sdk",
      "the GNOME runtime and SDK")
check(re.fullmatch(r"\d+", str(m.get("runtime-version", ""))) is not None,
      "a GNOME runtime version (%s)" % m.get("runtime-version"))

# ------------------------------------------------------------ the sandbox
args = m.get("finish-args", [])
check("--share=network" in args, "network (model downloads, the local server)")
check("--device=all" in args,
      "--device=all: the only device permission that includes /dev/accel (the NPU)")
check("--socket=wayland" in args and "--socket=fallback-x11" in args, "a display")
for a in args:
    if a.startswith("--filesystem="):
        what = a.split("=", 1)[1]
        check(what.endswith(":ro") and what.startswith("~/."),
              "%s: read-only, one tool's folder (no home, host or xdg-data)" % a)
# Models live in the app's own XDG data folder ($XDG_DATA_HOME/tern, inside
# ~/.var/app/ID/ in the sandbox), which needs no permission.
check(not any(a.startswith("--filesystem=xdg-data") for a in args),
      "no --filesystem=xdg-data: the models' folder is the app's own")

# ------------------------------------------------------------ the sources
options = set(re.findall(r"option\('([^']+)'", read("meson_options.txt")))
builtin = {"buildtype", "prefix", "werror", "b_lto", "b_sanitize", "b_lundef", "debug",
           "optimization", "warning_level"}
module_names = []


def walk(modules):
    for mod in modules:
        if isinstance(mod, str):  # a module in a file of its own
            check(os.path.isfile(os.path.join(manifest_dir, mod)), "module file " + mod)
            continue
        module_names.append(mod["name"])
        for src in mod.get("sources", []):
            if isinstance(src, str):
                check(os.path.isfile(os.path.join(manifest_dir, src)), "source file " + src)
                continue
            kind = src.get("type")
            if "path" in src:
                path = os.path.normpath(os.path.join(manifest_dir, src["path"]))
                check(os.path.exists(path), "%s: %s %s exists" % (mod["name"], kind, src["path"]))
                if kind == "dir":
                    check(os.path.isfile(os.path.join(path, "meson.build")),
                          "%s: the folder is the source tree" % mod["name"])
            elif kind in ("archive", "file"):
                check(re.fullmatch(r"[0-9a-f]{64}", src.get("sha256", "")) is not None,
                      "%s: %s pinned by sha256" % (mod["name"], src.get("url")))
            elif kind == "git":
                check(re.fullmatch(r"[0-9a-f]{40}", src.get("commit", "")) is not None,
                      "%s: git source pinned by commit" % mod["name"])
            else:
                check(False, "%s: a source of type %s the test knows" % (mod["name"], kind))
        if mod.get("buildsystem") == "meson":
            for opt in mod.get("config-opts", []):
                name = opt[2:].split("=", 1)[0]
                check(name in options or name in builtin, "meson option -D%s exists" % name)
        walk(mod.get("modules", []))


walk(m.get("modules", []))
check(module_names[-1:] == ["tern"], "Tern is the last module")
# The libraries data/meson.build finds with find_library (no pkg-config file
# in Debian) and the GNOME runtime does not have.
for lib in re.findall(r"cc\.find_library\('(cmark-gfm[^']*)'", data_meson):
    check("cmark-gfm" in module_names, "lib%s is built by the cmark-gfm module" % lib)
check("libsoup-3.0" in read("manager", "meson.build") and "json-glib-1.0" in data_meson,
      "libsoup 3 and json-glib come from the GNOME runtime")

print("%d failed" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
