#!/bin/sh
# Runs a GUI test on a display: the one we have, else a private Xvfb.
# Exits 77 (meson's "skipped") when there is none to be had.
if [ -n "${WAYLAND_DISPLAY:-}" ] || [ -n "${DISPLAY:-}" ]; then
    exec "$@"
fi
if command -v xvfb-run >/dev/null 2>&1; then
    exec xvfb-run -a -s "-screen 0 1280x1024x24 -nolisten tcp" "$@"
fi
echo "no display and no xvfb-run (tools/ensure-deps.sh app installs it): skipped" >&2
exit 77
