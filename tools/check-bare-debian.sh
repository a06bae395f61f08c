#!/usr/bin/env bash
# Release check: the README's commands, exactly as written, on a minimal
# Debian 12 (debootstrap --variant=minbase bookworm) with nothing else.
# The source is cloned in the new root the README's way (git from Debian),
# from this repository's committed HEAD. Then, as root inside the chroot:
#   echo hello | <README's run command>   must answer in the terminal chat
#   <README's test command>               must end "N passed, 0 failed, 0 skipped"
# Needs root, debootstrap (installed when missing), Debian's package mirror
# and the npm registry; see README.md for how long it takes.
#
# Usage: tools/check-bare-debian.sh [ROOT_DIR]
#   ROOT_DIR: where the new system goes (default: a new folder in /var/tmp);
#   removed at the end unless KEEP_ROOT=1. The logs of the two commands stay
#   beside it (ROOT_DIR-run.log, ROOT_DIR-test.log).
# Environment: MIRROR (default http://deb.debian.org/debian); NPM_CAFILE, a CA
# bundle for npm on a TLS-intercepting network (default: this machine's npm
# cafile setting, if any), given to npm inside as npm_config_cafile.
set -euo pipefail
# One brace group: bash reads all of it before running any, so an edit to
# this file during the long run cannot change what the run executes.
{
here=$(cd "$(dirname "$0")/.." && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}

# The README's two commands, taken from it so that what runs is what it says.
readme_cmd() {
    grep -E "^[^#]*make $1( |$)" "$here/README.md" | grep -E '^(apt-get|make)' | head -n 1 \
        | sed 's/[[:space:]]*#.*$//'
}
run_cmd=$(readme_cmd run)
test_cmd=$(readme_cmd test)
if [ -z "$run_cmd" ] || [ -z "$test_cmd" ]; then
    echo "check-bare-debian: README.md has no 'make run' / 'make test' command line" >&2
    exit 1
fi
[ "$(id -u)" -eq 0 ] || { echo "check-bare-debian: run as root (debootstrap, chroot)" >&2; exit 1; }
# debian_root_create, _mount, _cleanup, _run (shared with packaging/check-deb.sh).
. "$here/tools/debian-root.sh"

root=${1:-$(mktemp -d /var/tmp/tern-bare-debian.XXXXXX)}
mkdir -p "$root"
root=$(cd "$root" && pwd)
trap 'debian_root_cleanup "$root"' EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
echo "check-bare-debian: debootstrap --variant=minbase bookworm $root"
debian_root_create "$root" "$mirror" || exit 1
t1=$(date +%s)

debian_root_mount "$root"

# The source: this repository's committed history as a bare repository in the
# new root (a worktree's .git points outside it), cloned inside the README's way.
git clone -q --bare "$here" "$root/srv/tern.git"

cafile=${NPM_CAFILE:-$(npm config get cafile 2>/dev/null || true)}
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -f "$cafile" ]; then
    cp "$cafile" "$root/etc/npm-ca-bundle.pem"
    debian_root_env+=(npm_config_cafile=/etc/npm-ca-bundle.pem)
    echo "check-bare-debian: npm inside uses the CA bundle $cafile (npm_config_cafile)"
fi
inside() { debian_root_run "$root" "$1"; }

echo "check-bare-debian: getting the source (apt-get install git; git clone)"
inside "apt-get update -qq && apt-get install -y -qq git >/dev/null && git clone -q /srv/tern.git /root/tern" \
    || exit 1
t2=$(date +%s)

echo "check-bare-debian: echo hello | { $run_cmd; }"
if ! inside "cd /root/tern && echo hello | { $run_cmd; }" >"$root-run.log" 2>&1; then
    tail -n 40 "$root-run.log" >&2
    echo "check-bare-debian: the run command failed" >&2
    exit 1
fi
tail -n 5 "$root-run.log"
# The chat prints the prompt's answer after the banner; the demo model's
# answer is random text, so: the chat started and wrote something after it.
if ! grep -q "chatting with" "$root-run.log" || ! grep -Eq "generated [1-9][0-9]* tokens" "$root-run.log"; then
    echo "check-bare-debian: the run command did not answer in the terminal chat" >&2
    exit 1
fi
t3=$(date +%s)

echo "check-bare-debian: $test_cmd"
rc=0
inside "cd /root/tern && $test_cmd" >"$root-test.log" 2>&1 || rc=$?
t4=$(date +%s)
tail -n 15 "$root-test.log"
last=$(tail -n 1 "$root-test.log")

echo
echo "check-bare-debian: debootstrap $((t1 - t0)) s, source $((t2 - t1)) s," \
     "run command $((t3 - t2)) s, test command $((t4 - t3)) s, all $((t4 - t0)) s"
# A skip is a failure here: a test that cannot find its data on a machine
# set up the README's way is a bug.
if [ "$rc" -ne 0 ] || ! [[ $last =~ ^[0-9]+\ passed,\ 0\ failed,\ 0\ skipped$ ]]; then
    echo "check-bare-debian: FAILED (exit $rc, last line '$last')"
    exit 1
fi
echo "check-bare-debian: passed ($last)"
exit 0
}
