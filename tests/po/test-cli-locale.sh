#!/bin/sh
# tern-cli in German (docs/TRANSLATING.md): its help, its own errors and the
# engine's, the developer commands', the catalog's validation errors and an
# engine warning, from the build tree's catalogs (TERN_LOCALEDIR); English in
# the C locale. Needs no generated locale:
# LANGUAGE=de with C.UTF-8.
# usage: test-cli-locale.sh TERN_CLI LOCALEDIR [manager|no-manager] [server|no-server]
# (what tern-cli was built with: the catalog's and --tools' checks need them)
set -u
cli=$1
export TERN_LOCALEDIR=$2
with_manager=${3:-manager}
with_server=${4:-server}
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
# The developer commands (mkmodel, bench, tokenize, ...) are translated too.
check "a developer command's help in German" "^Aufruf: tern-cli info" "$(de "$cli" info --help)"
check "a developer command's error in German" "tokenize: -m MODELL.gguf ist erforderlich" \
    "$(de "$cli" tokenize hallo)"
check "a developer command's error in English in the C locale" \
    "tokenize: -m MODEL.gguf is required" "$(en "$cli" tokenize hallo)"
# The model catalog's validation errors, the JSON kind ("a string") included.
printf '{"schema": "eins"}' > "$tmp/catalog.json"
if [ "$with_manager" = manager ]; then
    check "a catalog validation error in German" \
        "schema: »schema« muss eine ganze Zahl sein (gefunden: eine Zeichenkette)" \
        "$(de env XDG_DATA_HOME="$tmp/data" "$cli" list --catalog "$tmp/catalog.json")"
    check "a catalog validation error in English in the C locale" \
        "schema: 'schema' must be an integer, not a string" \
        "$(en env XDG_DATA_HOME="$tmp/data" "$cli" list --catalog "$tmp/catalog.json")"
    # The shipped catalog's words (the build tree's copy; their msgids are in
    # data/catalog/catalog-strings.h): looked up when listed, English on disk
    # and in --json.
    list_de=$(de env -u TERN_CATALOG XDG_DATA_HOME="$tmp/data" "$cli" list)
    check "a family's description in German" \
        "^Qwen3 - Qwen3 von Alibaba: Denken ein- oder ausschaltbar, Apache-2.0.$" "$list_de"
    check "a tag's label in German" "gemma3:4b .* Gemma 3 4B (Vision)$" "$list_de"
    # The state column too (it said "available" in a German table).
    check "a model's state in German" "^  qwen3:0.6b  *[0-9,]* MB  verfügbar  *Qwen3 0.6B$" "$list_de"
    check "a family's description in English in the C locale" \
        "^Qwen3 - Alibaba's Qwen3: thinking on or off, Apache-2.0.$" \
        "$(en env -u TERN_CATALOG XDG_DATA_HOME="$tmp/data" "$cli" list)"
    check "--json keeps the catalog's English" \
        '"description" : "The smallest Qwen3, 0.6B parameters at Q8_0: quick short answers on any computer, thinking on or off."' \
        "$(de env -u TERN_CATALOG XDG_DATA_HOME="$tmp/data" "$cli" list --json)"
fi
# An engine warning (tn_session_params.warn): a damaged pin snapshot is
# ignored with a warning carried as a tn_error, shown in German with its path.
if "$cli" mkmodel --arch llama --type q8_0 --embd 64 --layers 2 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 --ctx 2048 --seed 3 -o "$tmp/m.gguf" >"$tmp/mk.out" 2>&1; then
    system="You are a terse assistant for a hardware store. Answer in one sentence, name the aisle, and never invent prices."
    set -- env XDG_CACHE_HOME="$tmp/cache" "$cli" run --single-turn -m "$tmp/m.gguf" \
        -s "$system" -n 2 -t 2 -p hi
    en "$@" >/dev/null
    snapshot=$(ls "$tmp"/cache/tern/pins/*.pin 2>/dev/null | head -n 1)
    if [ -n "$snapshot" ]; then
        printf 'XXXXXXXX' | dd of="$snapshot" bs=1 seek=0 conv=notrunc 2>/dev/null
        check "an engine warning in German, with its argument" \
            "^tern: $snapshot: Anheft-Schnappschuss verworfen (kein Anheft-Schnappschuss von Tern)" \
            "$(de "$@")"
        printf 'XXXXXXXX' | dd of="$snapshot" bs=1 seek=0 conv=notrunc 2>/dev/null
        check "the engine warning in English in the C locale" \
            "^tern: $snapshot: pin snapshot ignored (not a Tern pin snapshot)" "$(en "$@")"
    else
        echo "FAIL: no pin snapshot written in $tmp/cache"; fail=1
    fi
else
    echo "FAIL: mkmodel:"; cat "$tmp/mk.out"; fail=1
fi
# A file that is not a regular file (tn_read_file), and the doctor's repack
# cache line: whole sentences, no English words passed as arguments.
mkfifo "$tmp/werkzeuge.json"
if [ "$with_server" = server ]; then
    check "a FIFO refused in German" "$tmp/werkzeuge.json ist keine reguläre Datei (ein FIFO, ein Gerät oder ein Verzeichnis)" \
        "$(de timeout 20 "$cli" template --kind qwen3 --user hallo --tools "$tmp/werkzeuge.json")"
fi
check "the repack cache's doctor line in German" \
    "Umpack-Cache: $tmp/rc (TERN_REPACK_CACHE), Dateien: 0, 0 KiB; Seiten noch nicht geprüft" \
    "$(de env TERN_REPACK_CACHE="$tmp/rc" "$cli" doctor)"
check "the repack cache's doctor line in English in the C locale" \
    "repack cache: $tmp/rc (TERN_REPACK_CACHE), files: 0, 0 KiB; pages not checked yet" \
    "$(en env TERN_REPACK_CACHE="$tmp/rc" "$cli" doctor)"
# A model that cannot be written (the engine's GGUF writer), past ulimit -f
# (needs no root): the cause is in the message's format, so the sentence is
# German throughout (it was an English cause inside a German sentence).
set -- mkmodel --arch llama --type f32 --embd 64 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 32 --ff 128 -o "$tmp/gross.gguf"
check "a write error's cause in German" \
    "$tmp/gross.gguf: Schreiben nicht möglich: die Datei ist zu groß für dieses Dateisystem" \
    "$(de sh -c 'ulimit -f 8 && exec "$@"' sh "$cli" "$@")"
check "a write error's cause in English in the C locale" \
    "$tmp/gross.gguf: cannot write: the file is too large for this file system" \
    "$(en sh -c 'ulimit -f 8 && exec "$@"' sh "$cli" "$@")"
check "English in the C locale" "^usage: tern-cli COMMAND" "$(en "$cli" --help)"
check "the engine's error in English in the C locale" "not a GGUF file" "$(en "$cli" info "$tmp/kaputt.gguf")"
exit $fail
