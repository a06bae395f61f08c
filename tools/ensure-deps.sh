#!/usr/bin/env bash
# Installs the Debian packages a build needs, only when some are missing.
# Usage: tools/ensure-deps.sh base|test|app|manager ...
set -euo pipefail

base=(meson ninja-build pkg-config gcc python3 ca-certificates)
# clang and its runtimes: the fuzz build. libxrt-dev: the tests' build
# compiles and links the NPU backend's XRT probe (engine/xrt; Debian 12's XRT
# 2.13, which builds but cannot drive the NPU: docs/DOCTOR.md).
test=(clang libclang-rt-14-dev libxrt-dev
      # tools/llama-server-from-npm.sh: llama.cpp's llama-server from the npm
      # package's source, for the remote-llama-server test (issue 27)
      g++ git cmake)
# The desktop app and its tests (tests/app/ run under Xvfb; validators for the data files).
app=(libgtk-4-dev libadwaita-1-dev libjson-glib-dev libcmark-gfm-dev libcmark-gfm-extensions-dev
     # API keys of remote servers in the system keyring (manager/tern-keyring.c)
     libsecret-1-dev
     gettext desktop-file-utils appstream xvfb xauth
     # localedef's sources: app-walk-numbers-* make de_DE, es_ES, fr_FR
     locales
     # image prompts (imageio/): WebP decoding, and zlib for tests/imageio
     webp-pixbuf-loader zlib1g-dev
     # tests/install: the installed app gets its own D-Bus session
     # (dbus-run-session) and is told to quit over it (gapplication)
     dbus-daemon libglib2.0-bin
     # gnome.post_install's programs, which meson looks up when it configures
     gtk-update-icon-cache shared-mime-info)
# The model manager (manager/: catalog, downloads; tern-cli list/pull) and its
# tests, whose HTTP server is python3's http.server; curl: tests/server (tern-cli serve).
manager=(libglib2.0-dev libsoup-3.0-dev libjson-glib-dev glib-networking curl)

want=("${base[@]}")
for group in "$@"; do
    case "$group" in
        base) ;;
        test) want+=("${test[@]}") ;;
        app) want+=("${app[@]}") ;;
        manager) want+=("${manager[@]}") ;;
        *) echo "ensure-deps: unknown group '$group'" >&2; exit 1 ;;
    esac
done

missing=()
for pkg in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
# The tests (only they) run the official openai npm client (tests/server).
# The machine's Node.js may come from outside Debian; only when there is none
# do we ask Debian for one.
for group in "$@"; do
    [ "$group" = test ] || continue
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "ensure-deps: installing ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "ensure-deps: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
