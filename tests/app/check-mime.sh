#!/bin/sh
# The GGUF MIME type: well-formed shared-mime-info XML (xmllint, when
# present), a *.gguf glob, and the same type as the desktop file's MimeType=.
# update-mime-database, when present, compiles it into a scratch database
# whose globs map *.gguf to the type.
mime="$1"; desktop="$2"
. "$(dirname "$0")/../checks.sh"
type=$(sed -n 's/^MimeType=\([^;]*\);.*/\1/p' "$desktop")
check "the desktop file names a MIME type" [ -n "$type" ]
check "the MIME file defines $type" grep -q "<mime-type type=\"$type\">" "$mime"
check "the MIME file globs *.gguf" grep -q '<glob pattern="\*\.gguf"/>' "$mime"
if command -v xmllint >/dev/null 2>&1; then
    check "the MIME file is well-formed XML" xmllint --noout "$mime"
fi
if command -v update-mime-database >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    mkdir -p "$tmp/packages"
    cp "$mime" "$tmp/packages/"
    update-mime-database "$tmp" >/dev/null 2>&1
    check "update-mime-database maps *.gguf to $type" grep -q "^$type:\*\.gguf$" "$tmp/globs"
    rm -rf "$tmp"
fi
checks_done app-mime-type
