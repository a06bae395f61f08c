#!/usr/bin/env bash
# Release check for the Debian package (packaging/debian/):
#   1. exports the committed HEAD (a clean checkout: uncommitted changes are
#      not in it), with packaging/debian/ as its debian/;
#   2. builds it with dpkg-buildpackage -b -us -uc (build dependencies from
#      Debian 12, installed here when missing);
#   3. runs lintian on it: any error fails the check;
#   4. installs it into a fresh Debian 12 root (debootstrap --variant=minbase
#      bookworm, tools/debian-root.sh) with apt, its hard dependencies only
#      (--no-install-recommends), and there runs tern-cli --version, tern-cli
#      run -m DEMO -p hi -n 4 (DEMO: a model written here by the package's own
#      tern-cli mkmodel, copied in), tern --version and desktop-file-validate
#      on the installed desktop file, and checks that Debian's triggers
#      compiled the GSettings schema.
# Needs root and Debian's package mirror; no npm (the package build runs no
# tests: packaging/debian/rules). Times are in packaging/README.md.
#
# Usage: packaging/check-deb.sh [WORK_DIR]
#   WORK_DIR: default a new folder in /var/tmp, removed at the end unless
#   KEEP_ROOT=1. The package, the build log and lintian's report are copied
#   to OUT (default build-deb/ in this checkout).
# Environment: MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
# One brace group: bash reads all of it before running any of it.
{
here=$(cd "$(dirname "$0")/.." && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}
out=${OUT:-$here/build-deb}
[ "$(id -u)" -eq 0 ] || { echo "check-deb: run as root (apt, debootstrap, chroot)" >&2; exit 1; }
# debian_root_create, _mount, _cleanup, _run (shared with tools/check-bare-debian.sh).
. "$here/tools/debian-root.sh"

version=$(sed -n "s/^  version: '\([^']*\)',/\1/p" "$here/meson.build" | head -n 1)
deb_version=$(dpkg-parsechangelog -l "$here/packaging/debian/changelog" -S Version)
# The upstream part of the package version is meson's project version.
if [ "${deb_version%-*}" != "$version" ]; then
    echo "check-deb: packaging/debian/changelog is at $deb_version, meson.build at $version" >&2
    exit 1
fi
if [ -n "$(git -C "$here" status --porcelain --untracked-files=no)" ]; then
    echo "check-deb: note: uncommitted changes are not in the package (it builds HEAD)"
fi

work=${1:-$(mktemp -d /var/tmp/tern-check-deb.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
root=$work/root
mkdir -p "$root"
trap 'debian_root_cleanup "$root" || true; [ "${KEEP_ROOT:-0}" = 1 ] || rm -rf --one-file-system "$work"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$out"
t0=$(date +%s)

# ------------------------------------------------------------ 1. the source
src=$work/tern-$version
git -C "$here" archive --format=tar --prefix="tern-$version/" HEAD | tar -x -C "$work"
cp -a "$src/packaging/debian" "$src/debian"

# ---------------------------------------------------------------- 2. build
need=(dpkg-dev debhelper lintian fakeroot)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! (cd "$src" && dpkg-checkbuilddeps) 2>/dev/null; then
    # The Build-Depends field, folded onto one line, for apt-get satisfy.
    bd=$(awk '/^Build-Depends:/ {on = 1; sub(/^Build-Depends:/, ""); print; next}
              on && /^[ \t]/ {print; next} {on = 0}' "$src/debian/control" | tr -d '\n')
    echo "check-deb: installing the build dependencies"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get satisfy -y -qq --no-install-recommends "$bd" >/dev/null
fi
echo "check-deb: dpkg-buildpackage -b -us -uc in $src"
if ! (cd "$src" && dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1; then
    tail -n 40 "$out/build.log" >&2
    echo "check-deb: dpkg-buildpackage failed (log: $out/build.log)" >&2
    exit 1
fi
arch=$(dpkg --print-architecture)
deb=$work/tern_${deb_version}_$arch.deb
changes=$work/tern_${deb_version}_$arch.changes
cp "$deb" "$out/"
t1=$(date +%s)
echo "check-deb: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) in $((t1 - t0)) s"

# --------------------------------------------------------------- 3. lintian
lintian --display-info --fail-on error "$changes" >"$out/lintian.txt" 2>&1 \
    && lintian_ok=1 || lintian_ok=0
for tag in E W I P; do
    printf '%s: %s  ' "$tag" "$(grep -c "^$tag: " "$out/lintian.txt" || true)"
done
echo "(lintian, $out/lintian.txt)"
grep '^E: ' "$out/lintian.txt" >&2 || true
if [ "$lintian_ok" != 1 ]; then
    echo "check-deb: lintian reports errors" >&2
    exit 1
fi

# The demo model, written by the package's own tern-cli (on this machine).
dpkg-deb -x "$deb" "$work/unpacked"
"$work/unpacked/usr/bin/tern-cli" mkmodel --arch qwen3 --type q8_0 --embd 256 --layers 4 \
    --heads 4 --kv-heads 2 --head-dim 64 --ff 768 --ctx 4096 --seed 7 \
    --name "Tern demo model (random weights)" -o "$work/demo.gguf" >/dev/null
t2=$(date +%s)

# ------------------------------------------------- 4. a fresh Debian 12 root
echo "check-deb: debootstrap --variant=minbase bookworm $root"
debian_root_create "$root" "$mirror" || exit 1
debian_root_mount "$root"
cp "$deb" "$work/demo.gguf" "$root/tmp/"
t3=$(date +%s)
inside() { debian_root_run "$root" "$1"; }
echo "check-deb: apt-get install ./$(basename "$deb") desktop-file-utils (no recommends)"
if ! inside "apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        /tmp/$(basename "$deb") desktop-file-utils" >"$out/install.log" 2>&1; then
    tail -n 30 "$out/install.log" >&2
    echo "check-deb: the package did not install" >&2
    exit 1
fi
echo "check-deb: $(grep -c '^Setting up' "$out/install.log") packages set up"
t4=$(date +%s)

failures=0
check() {
    local what=$1 cmd=$2 got
    if got=$(inside "$cmd" 2>&1); then
        echo "ok: $what"
        [ -z "$got" ] || printf '%s\n' "$got" | tail -n 4 | sed 's/^/    /'
    else
        echo "FAILED: $what" >&2
        printf '%s\n' "$got" | tail -n 20 >&2
        failures=$((failures + 1))
    fi
}
check "tern-cli --version is $version" "tern-cli --version | grep -x 'tern-cli $version'"
check "tern-cli run -m DEMO -p hi -n 4" "tern-cli run -m /tmp/demo.gguf -p hi -n 4"
check "tern --version is $version" "tern --version | grep -x 'tern $version'"
check "desktop-file-validate" \
    "desktop-file-validate /usr/share/applications/io.github.tern.Tern.desktop"
# (libglib2.0-0's trigger runs glib-compile-schemas; the compiled file holds
# the schema's id as a string.)
check "the schema compiled by Debian's trigger" \
    "grep -q io.github.tern.Tern /usr/share/glib-2.0/schemas/gschemas.compiled"
check "the model catalog installed" "tern-cli list >/dev/null"
t5=$(date +%s)

echo
echo "check-deb: build $((t1 - t0)) s, lintian and demo $((t2 - t1)) s, debootstrap $((t3 - t2)) s," \
     "install $((t4 - t3)) s, checks $((t5 - t4)) s, all $((t5 - t0)) s"
if [ "$failures" -ne 0 ]; then
    echo "check-deb: FAILED ($failures checks)"
    exit 1
fi
echo "check-deb: passed ($out/$(basename "$deb"))"
exit 0
}
