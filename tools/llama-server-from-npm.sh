#!/bin/sh
# llama.cpp's llama-server, made from the npm package node-llama-cpp@3.22.1
# (issue 27: the remote engine is tested against it).
#
# The package's prebuilt CPU binaries (@node-llama-cpp/linux-x64) hold
# libllama, libggml and libllama-common but no llama-server and no libmtmd.
# The package also holds the llama.cpp source those libraries were built
# from (llama/gitRelease.bundle, commit de3ff81). This script compiles only
# what is missing from that source, the server (tools/server) and the
# multimodal library it links (tools/mtmd), and links them against the
# prebuilt libraries, so nothing of the engine itself is rebuilt: about a
# tenth of a full llama.cpp build. The server has no web UI (its assets are
# downloaded at llama.cpp's build time); the HTTP API is complete.
#
# usage: tools/llama-server-from-npm.sh [OUT_DIR]
#   prints the path of the llama-server binary on success (exit 0);
#   exit 77 when the package or a tool is not available (a test skips);
#   any other status: the build failed.
# NLC_DIR: where the npm package is installed (default /tmp/tern-llamacpp,
# shared with tools/llamacpp-compare.sh). OUT_DIR (default
# $NLC_DIR/llama-server) keeps the result: a second call reuses it.
set -eu
nlc=${NLC_DIR:-/tmp/tern-llamacpp}
out=${1:-$nlc/llama-server}
bin="$out/llama-server"
say() { echo "llama-server-from-npm: $*" >&2; }

if [ -x "$bin" ] && [ -f "$out/.complete" ]; then
    echo "$bin"
    exit 0
fi
for tool in npm git g++ cmake; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        say "$tool is not installed"
        exit 77
    fi
done
# --ignore-scripts: only the package's files are needed, not its postinstall
# script, which is written for Node.js 20 (the package's engines field) while
# Debian 12 has 18. npm's own words go to stderr when the install fails.
if [ ! -d "$nlc/node_modules/node-llama-cpp" ] || [ ! -d "$nlc/node_modules/@node-llama-cpp/linux-x64" ]; then
    mkdir -p "$nlc"
    if ! (cd "$nlc" && { [ -f package.json ] || npm init -y >/dev/null; } &&
        NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional --no-audit --no-fund \
            --ignore-scripts \
            node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >"$nlc/npm-install.log" 2>&1); then
        say "cannot fetch node-llama-cpp@3.22.1 from the npm registry:"
        tail -n 5 "$nlc/npm-install.log" >&2
        exit 77
    fi
fi
bundle="$nlc/node_modules/node-llama-cpp/llama/gitRelease.bundle"
libs="$nlc/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
if [ ! -f "$bundle" ] || [ ! -f "$libs/libllama-common.so" ]; then
    say "the package has no source bundle or no prebuilt libraries"
    exit 77
fi

rm -rf "$out"
mkdir -p "$out/obj" "$out/ui"
git clone -q "$bundle" "$out/src" 2>/dev/null || { say "cannot clone $bundle"; exit 1; }
src="$out/src"

# The UI's generated sources, without assets (they come from the network).
cmake -DUI_SOURCE_DIR="$src/tools/ui" -DUI_BINARY_DIR="$out/ui" -DLLAMA_SOURCE_DIR="$src" \
    -DLLAMA_BUILD_NUMBER=0 -DHF_BUCKET=none -DHF_VERSION= -DHF_ENABLED=OFF -DBUILD_UI=OFF \
    -DLLAMA_UI_GZIP=OFF -P "$src/scripts/ui-assets.cmake" >"$out/ui.log" 2>&1 ||
    { say "UI stub generation failed: $out/ui.log"; exit 1; }

# What tools/mtmd/CMakeLists.txt and tools/server/CMakeLists.txt compile:
# the mtmd library (not its CLI), the vendored hashes it links, the server.
{
    for f in "$src"/tools/mtmd/*.cpp "$src"/tools/mtmd/models/*.cpp; do
        case "$f" in */mtmd-cli.cpp|*/deprecation-warning.cpp) continue ;; esac
        echo "$f"
    done
    ls "$src"/vendor/hash/*/*.c "$src"/vendor/hash/hash.cpp "$src"/tools/server/*.cpp "$out/ui/ui.cpp"
} >"$out/sources"

inc="-I$src/include -I$src/ggml/include -I$src/common -I$src/tools/mtmd -I$src/tools/server \
-I$src/vendor -I$src/vendor/cpp-httplib -I$src/vendor/hash -I$src -I$out/ui"
jobs=$(nproc 2>/dev/null || echo 2)
OBJ="$out/obj" SRC="$src" UI="$out/ui" INC="$inc"
export OBJ SRC UI INC
# -O1: the server only runs small test models; optimisation time is build time.
# shellcheck disable=SC2086
if ! xargs -P "$jobs" -I{} sh -c '
    f=$1; shift
    o="$OBJ/$(echo "$f" | sed "s|^$SRC/||; s|^$UI/||; s|/|_|g").o"
    cxx="g++ -std=c++17 -O1 -fPIC -w -DLLAMA_SHARED -DGGML_SHARED $INC"
    case "$f" in
        # compiled as C++, as vendor/hash/CMakeLists.txt says (a namespace)
        */sha1/sha1.c) $cxx -x c++ -c "$f" -o "$o" ;;
        *.c) gcc -O1 -fPIC -w $INC -c "$f" -o "$o" ;;
        *) $cxx -c "$f" -o "$o" ;;
    esac || { echo "failed: $f" >&2; exit 255; }' _ {} \
    <"$out/sources" 2>"$out/build.log"; then
    say "compiling failed: $(tail -5 "$out/build.log")"
    exit 1
fi
# shellcheck disable=SC2086
g++ -o "$bin" "$out"/obj/*.o -L"$libs" -l:libllama-common.so -l:libllama.v0.5.0.so \
    -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$libs" -pthread 2>>"$out/build.log" ||
    { say "linking failed: $(tail -5 "$out/build.log")"; exit 1; }
# ggml loads its CPU backend (one library per instruction set) from the
# executable's folder.
for lib in "$libs"/libggml-cpu-*.so; do
    ln -sf "$lib" "$out/"
done
"$bin" --version >/dev/null 2>&1 || { say "the built llama-server does not run"; exit 1; }
rm -rf "$out/obj" "$src"
touch "$out/.complete"
echo "$bin"
