#!/bin/sh
# `meson install` into a temporary folder, then the installed programs run
# from there: tern-cli --version, mkmodel and run on a tiny model, the model
# catalog read from the installed tree, and the installed tern under Xvfb
# loading that model. The folder is not the prefix the build was configured
# for (it is DESTDIR/PREFIX), so this also shows that the installed tree
# finds its data relative to itself, and nothing through the build tree.
#
# With DESTDIR meson skips gnome.post_install (a package's triggers do that
# on the target system): the test checks that each step is there and runs
# the same command on the installed tree, as the trigger would.
#
# Usage (tests/install/meson.build):
#   test-install.sh BUILD_ROOT PREFIX BINDIR DATADIR VERSION APP MANAGER
#   APP, MANAGER: 1 when the desktop app, the model manager is built.
set -eu
build=${1:?usage: test-install.sh BUILD_ROOT PREFIX BINDIR DATADIR VERSION APP MANAGER}
prefix=$2 bindir=$3 datadir=$4 version=$5 app=$6 manager=$7
tmp=${TERN_TEST_TMP:?TERN_TEST_TMP is not set}/install
rm -rf "$tmp"
mkdir -p "$tmp"
dest=$tmp/dest
root=$dest$prefix
bin=$root/$bindir
share=$root/$datadir
failures=0
ok() { echo "ok: $1"; }
fail() { echo "FAIL: $1" >&2; failures=$((failures + 1)); }
check() { what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }

# ------------------------------------------------------------- the install
if ! meson install -C "$build" --no-rebuild --destdir "$dest" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log" >&2
    echo "FAIL: meson install" >&2
    exit 1
fi
ok "meson install --destdir $dest"
check "tern-cli installed in $bin" test -x "$bin/tern-cli"
[ "$manager" = 1 ] && check "model catalog installed" test -f "$share/tern/catalog/models.json"
check "tern-cli's manual page installed" test -f "$share/man/man1/tern-cli.1"

# No path of the source or the build tree in the installed programs'
# strings (the debug information names them, as it should: not read at run
# time). objcopy takes out the data sections only.
src=$(sed -n 's/.*"source": *"\([^"]*\)".*/\1/p' "$build/meson-info/meson-info.json" | head -n 1)
build_abs=$(cd "$build" && pwd)
for exe in "$bin"/*; do
    for section in .rodata .data; do
        objcopy -O binary --only-section="$section" "$exe" "$tmp/section" 2>/dev/null || continue
        for tree in "$src" "$build_abs"; do
            [ -n "$tree" ] || continue
            if grep -aqF "$tree" "$tmp/section"; then
                fail "$(basename "$exe") has '$tree' in $section"
            fi
        done
    done
done
ok "no source or build tree path in the installed programs' data"

# -------------------------------------------------------------- tern-cli
out=$("$bin/tern-cli" --version 2>&1) || fail "tern-cli --version exits 0"
check "tern-cli --version says $version ($out)" test "$out" = "tern-cli $version"

# A demo model by its key (tern.random_weights), named as a user names one:
# the app remembers any file opened but its own demo file (docs/APP.md,
# "What the app remembers"), which is what the app check below waits for.
model=$tmp/tiny.gguf
"$bin/tern-cli" mkmodel --arch llama --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --ctx 256 --seed 3 --name "Tern install test" -o "$model" \
    >"$tmp/mkmodel.log" 2>&1 \
    || { cat "$tmp/mkmodel.log" >&2; fail "tern-cli mkmodel"; }
check "tern-cli mkmodel wrote the tiny model" test -s "$model"
if "$bin/tern-cli" run -m "$model" -p hi -n 4 >"$tmp/run.log" 2>&1; then
    ok "tern-cli run -m tiny.gguf -p hi -n 4"
else
    cat "$tmp/run.log" >&2
    fail "tern-cli run -m tiny.gguf -p hi -n 4"
fi

# The catalog the installed tern-cli reads is the installed one: with it,
# `list` shows its families; without it, the error names its path there.
if [ "$manager" = 1 ]; then
    export XDG_DATA_HOME="$tmp/data" XDG_CACHE_HOME="$tmp/cache" XDG_CONFIG_HOME="$tmp/config"
    unset TERN_CATALOG || true
    if "$bin/tern-cli" list >"$tmp/list.log" 2>&1 && grep -qi qwen3 "$tmp/list.log"; then
        ok "tern-cli list reads the installed catalog"
    else
        cat "$tmp/list.log" >&2
        fail "tern-cli list reads the installed catalog"
    fi
    mv "$share/tern/catalog/models.json" "$tmp/models.json"
    "$bin/tern-cli" list >"$tmp/list-missing.log" 2>&1 || true
    check "without it, tern-cli list names $share/tern/catalog/models.json" \
        grep -qF "$share/tern/catalog/models.json" "$tmp/list-missing.log"
    mv "$tmp/models.json" "$share/tern/catalog/models.json"
fi

# The NPU kernel manifest: installed, and what the installed doctor reads.
check "NPU kernel manifest installed" test -f "$share/tern/xclbins/manifest.json"
xclbins_real=$(cd "$share/tern/xclbins" 2>/dev/null && pwd -P)
"$bin/tern-cli" doctor --quick >"$tmp/doctor.log" 2>&1
check "tern-cli doctor reads the installed manifest" \
    grep -qF "no kernel images ship in $xclbins_real yet" "$tmp/doctor.log"

# ------------------------------------------------------------------ the app
if [ "$app" = 1 ]; then
    # gnome.post_install: each step is wired, and runs on the installed tree.
    for tool in glib-compile-schemas icon-cache update-desktop-database update-mime-database; do
        line=$(grep "Skipping custom install script because DESTDIR is set" "$tmp/install.log" \
               | grep -- "$tool" | head -n 1 || true)
        if [ -z "$line" ]; then
            fail "gnome.post_install runs $tool"
            continue
        fi
        ok "gnome.post_install runs $tool"
        # '... is set '\''PROGRAM ARGS... /prefix/share/DIR'\''': the same
        # command, its last argument (a folder in the prefix) under DESTDIR.
        cmd=$(printf '%s\n' "$line" | sed "s/.*DESTDIR is set '\(.*\)'.*/\1/")
        last=${cmd##* }
        # shellcheck disable=SC2086
        if ${cmd% *} "$dest$last" >"$tmp/post.log" 2>&1; then
            ok "  ran: ${cmd% *} \$DESTDIR$last"
        else
            cat "$tmp/post.log" >&2
            fail "  ran: ${cmd% *} \$DESTDIR$last"
        fi
    done
    check "schemas compiled" test -f "$share/glib-2.0/schemas/gschemas.compiled"
    check "icon cache written" test -f "$share/icons/hicolor/icon-theme.cache"
    check "desktop database written" test -f "$share/applications/mimeinfo.cache"
    check "MIME database written" test -f "$share/mime/mime.cache"
    check "desktop file installed" test -f "$share/applications/io.github.tern.Tern.desktop"
    check "metainfo installed" test -f "$share/metainfo/io.github.tern.Tern.metainfo.xml"
    check "tern's manual page installed" test -f "$share/man/man1/tern.1"

    out=$("$bin/tern" --version 2>&1) || fail "tern --version exits 0"
    check "tern --version says $version ($out)" test "$out" = "tern $version"

    # The installed app, started on the tiny model under Xvfb with its own
    # D-Bus session (GApplication registers there) and a keyfile settings
    # backend: the model loaded when the app wrote it as last-model. The
    # schema comes from the installed tree only: XDG_DATA_DIRS names the
    # system's, where no Tern schema is. Leaks are the app tests' business
    # (with their suppressions), not this one's.
    cat >"$tmp/app.sh" <<EOS
#!/bin/sh
export GSETTINGS_BACKEND=keyfile XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data"
export XDG_CACHE_HOME="$tmp/cache" XDG_DATA_DIRS=/usr/local/share:/usr/share
export GSK_RENDERER=cairo GDK_DEBUG=gl-disable NO_AT_BRIDGE=1
export ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0"
unset GSETTINGS_SCHEMA_DIR
"$bin/tern" "$model" >"$tmp/app.log" 2>&1 &
pid=\$!
keyfile="$tmp/config/glib-2.0/settings/keyfile"
i=0
while [ \$i -lt 240 ]; do
    if grep -qF "last-model='$model'" "\$keyfile" 2>/dev/null; then break; fi
    kill -0 \$pid 2>/dev/null || break
    sleep 0.5
    i=\$((i + 1))
done
if ! grep -qF "last-model='$model'" "\$keyfile" 2>/dev/null; then
    echo "the installed tern did not load the model; its output:" >&2
    cat "$tmp/app.log" >&2
    kill \$pid 2>/dev/null
    exit 1
fi
echo "the installed tern loaded the tiny model"
gapplication action io.github.tern.Tern quit
wait \$pid
rc=\$?
echo "the installed tern quit with status \$rc"
[ \$rc -eq 0 ] || cat "$tmp/app.log" >&2
exit \$rc
EOS
    here=$(dirname "$0")
    rc=0
    sh "$here/../app/xvfb-run.sh" dbus-run-session -- sh "$tmp/app.sh" || rc=$?
    if [ "$rc" -eq 77 ]; then
        fail "no display and no xvfb-run for the installed tern (tools/ensure-deps.sh app)"
    else
        check "the installed tern starts, loads a model and quits" test "$rc" -eq 0
    fi
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
rm -rf "$tmp"
echo "all checks passed"
