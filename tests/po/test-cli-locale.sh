#!/bin/sh
# tern-cli in German (docs/TRANSLATING.md): its help, its own errors and the
# engine's, from the build tree's catalogs (TERN_LOCALEDIR); English in the C
# locale. Needs no generated locale:
# LANGUAGE=de with C.UTF-8.
# usage: test-cli-locale.sh TERN_CLI LOCALEDIR
set -u
cli=$1
export TERN_LOCALEDIR=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, pattern, text
    if printf '%s' "$3" | grep -q -- "$2"; then
        echo "ok: $1"
    else
        echo "FAIL: $1: no '$2' in:"; printf '%s\n' "$3"; fail=1
    fi
}
[ -f "$TERN_LOCALEDIR/de/LC_MESSAGES/tern.mo" ] || { echo "FAIL: no de/LC_MESSAGES/tern.mo in $TERN_LOCALEDIR"; exit 1; }

de() { env -u LC_ALL -u LC_MESSAGES LANG=C.UTF-8 LANGUAGE=de "$@" 2>&1; }
en() { env -u LANGUAGE LC_ALL=C "$@" 2>&1; }

check "help in German" "^Aufruf: tern-cli BEFEHL" "$(de "$cli" --help)"
check "a command's summary in German" "ein installiertes Modell entfernen" "$(de "$cli" --help)"
check "tern-cli's own error in German" "unbekannter Befehl »frobnicate«" "$(de "$cli" frobnicate)"
printf 'this is not GGUF' > "$tmp/kaputt.gguf"
out=$(de "$cli" info "$tmp/kaputt.gguf")
check "the engine's error in German, with its arguments" "$tmp/kaputt.gguf: keine GGUF-Datei" "$out"
check "an option's range in German" "benötigt eine ganze Zahl von 0 bis" "$(de "$cli" run -m "$tmp/kaputt.gguf" -n x -p hi)"
check "English in the C locale" "^usage: tern-cli COMMAND" "$(en "$cli" --help)"
check "the engine's error in English in the C locale" "not a GGUF file" "$(en "$cli" info "$tmp/kaputt.gguf")"
exit $fail
