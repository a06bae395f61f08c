# A fresh, minimal Debian 12 root for the release checks that need one
# (tools/check-bare-debian.sh, packaging/check-deb.sh). Sourced by them
# (bash); needs root, debootstrap (installed when missing) and Debian's
# package mirror.
#
#   debian_root_create ROOT [MIRROR]  debootstrap --variant=minbase bookworm into
#                                     ROOT (it must exist), with the updates and
#                                     security suites, resolv.conf, unsafe dpkg io
#   debian_root_mount ROOT            proc, sys, dev, dev/pts and a private /dev/shm
#   debian_root_cleanup ROOT          unmounts, then removes ROOT unless
#                                     KEEP_ROOT=1 (and only when nothing is
#                                     mounted below it any more)
#   debian_root_run ROOT COMMAND      COMMAND with sh -c inside, in a clean
#                                     environment: debian_root_env (an array
#                                     callers may extend)
# The caller sets its own EXIT trap that calls debian_root_cleanup.

debian_root_mounted=()
debian_root_env=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
                 LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive)

# An empty or "/" root would mount over, or write into, this machine's own
# /proc, /dev and /etc: every function refuses it.
debian_root_check() {
    case ${1:-} in
        "" | / | //*) echo "debian-root: refusing root '${1:-}'" >&2; return 1 ;;
    esac
    [ -d "$1" ] || { echo "debian-root: $1 is not a folder" >&2; return 1; }
}

# A run killed before its cleanup (SIGKILL, a closed session) leaves the
# machine's own /dev bound under its root: a plain `rm -rf` of that root then
# deletes this machine's /dev/null, /dev/urandom and the rest (it happened).
# Refuse to build into such a root, and say how to take it down safely.
debian_root_refuse_mounted() {
    local root
    root=$(cd "$1" && pwd) || return 1
    if awk -v r="$root/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        echo "debian-root: $root still has file systems mounted below it (a run that was" \
             "killed?): unmount them with 'umount -R $root', then remove it with" \
             "'rm -rf --one-file-system $root'" >&2
        return 1
    fi
}

debian_root_create() {
    debian_root_check "${1:-}" || return 1
    debian_root_refuse_mounted "$1" || return 1
    local root=$1 mirror=${2:-http://deb.debian.org/debian}
    if ! command -v debootstrap >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap
    fi
    chmod 755 "$root" # it becomes /: mktemp's 700 would lock out apt's _apt user
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
        || { tail -n 30 "$root.debootstrap.log" >&2; return 1; }
    rm -f "$root.debootstrap.log"
    # A Debian 12 installation also has its updates and security updates.
    cat >"$root/etc/apt/sources.list" <<EOS
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOS
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    # A throw-away root: dpkg need not fsync each package's files (the same
    # packages install, minutes faster on a loaded disk).
    echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/tern-check-unsafe-io"
}

debian_root_mount() {
    debian_root_check "${1:-}" || return 1
    local root=$1 m
    for m in proc sys dev dev/pts; do
        mkdir -p "$root/$m"
        case $m in
            proc) mount -t proc proc "$root/proc" ;;
            sys) mount -t sysfs sys "$root/sys" ;;
            dev) mount --bind /dev "$root/dev" ;;
            dev/pts) mount --bind /dev/pts "$root/dev/pts" ;;
        esac || return 1
        debian_root_mounted+=("$root/$m")
    done
    # glib and python's multiprocessing look for /dev/shm: a private tmpfs,
    # as on a booted system.
    mkdir -p "$root/dev/shm" && mount -t tmpfs shm "$root/dev/shm" \
        && debian_root_mounted+=("$root/dev/shm")
}

debian_root_cleanup() {
    debian_root_check "${1:-}" || return 1
    local root=$1 i
    for ((i = ${#debian_root_mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${debian_root_mounted[i]}" 2>/dev/null || true
    done
    debian_root_mounted=()
    if [ "${KEEP_ROOT:-0}" != 1 ] && [ -d "$root" ]; then
        if ! grep -q " $root/" /proc/mounts; then
            rm -rf --one-file-system "$root"
        else
            echo "debian-root: $root still has mounts; left in place" >&2
        fi
    fi
}

debian_root_run() {
    debian_root_check "${1:-}" || return 1
    chroot "$1" /usr/bin/env -i "${debian_root_env[@]}" /bin/sh -c "$2"
}
