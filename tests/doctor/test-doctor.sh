#!/bin/sh
# tern-cli doctor against fake device trees ($TERN_DOCTOR_ROOT: ROOT/dev,
# ROOT/sys, ROOT/proc, ROOT/etc and ROOT/xrt.fake stand in for the machine;
# docs/DOCTOR.md). Every problem the doctor knows gets a tree, and each
# case checks the exact line (and fix) it prints and the exit status:
# 0 when the requested backend runs, 3 when it cannot, 1 for usage.
#
# Who may open the fake /dev/accel/accel0 is decided by the tree's
# proc/self/status (Uid, Gid, Groups) against the node's real owner and
# mode, so the cases hold whether the tests run as root or not.
#
# Environment (set by tests/meson.build): TERN_CLI, TERN_TEST_TMP.
set -u

cli=${TERN_CLI:?TERN_CLI is not set}
tmp=${TERN_TEST_TMP:-/tmp}/doctor.$$
mkdir -p "$tmp" || exit 1
trap 'chmod -R u+rwX "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
checks=0
failures=0
export LC_ALL=C LANGUAGE=

fake_uid=$(( $(id -u) + 1000 ))
other_gid=$(( $(id -g) + 1000 ))

# tree DIR: a machine where everything the NPU needs is right (XRT 2.18
# with its plugin, firmware 1.1.2.65, amdxdna 0.6, Linux 6.12, memlock
# unlimited, the user in the device's group), but no kernels ship.
tree() {
    r=$1
    rm -rf "$r"
    mkdir -p "$r/dev/accel" "$r/sys/class/accel/accel0/device" "$r/sys/module/amdxdna" \
        "$r/proc/self" "$r/proc/sys/kernel" "$r/etc" "$r/opt/xilinx/xrt/lib" "$r/xclbins"
    : >"$r/dev/accel/accel0"
    chmod 0660 "$r/dev/accel/accel0"
    dev_gid=$(stat -c %g "$r/dev/accel/accel0")
    echo RyzenAI-npu4 >"$r/sys/class/accel/accel0/device/vbnv"
    echo 1.1.2.65 >"$r/sys/class/accel/accel0/device/fw_version"
    echo 0.6 >"$r/sys/module/amdxdna/version"
    printf 'processor\t: 0\nmodel name\t: AMD Ryzen AI 9 HX 370 w/ Radeon 890M\n' >"$r/proc/cpuinfo"
    echo 6.12.9-amd64 >"$r/proc/sys/kernel/osrelease"
    printf 'Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         unlimited            unlimited            bytes\n' \
        >"$r/proc/self/limits"
    printf 'Name:\ttern-cli\nUid:\t%s\t%s\t%s\t%s\nGid:\t%s\t%s\t%s\t%s\nGroups:\t%s\n' \
        "$fake_uid" "$fake_uid" "$fake_uid" "$fake_uid" \
        "$other_gid" "$other_gid" "$other_gid" "$other_gid" "$dev_gid" >"$r/proc/self/status"
    printf 'render:x:%s:alice\nalice:x:%s:\n' "$dev_gid" "$other_gid" >"$r/etc/group"
    printf 'root:x:0:0:root:/root:/bin/sh\nalice:x:%s:%s:Alice:/home/alice:/bin/sh\n' \
        "$fake_uid" "$other_gid" >"$r/etc/passwd"
    printf 'version=2.18.0\ndevices=1\nlib_dir=/opt/xilinx/xrt/lib\n' >"$r/xrt.fake"
    : >"$r/opt/xilinx/xrt/lib/libxrt_driver_xdna.so"
    printf '{"format": 1, "kernels": []}\n' >"$r/xclbins/manifest.json"
}

# doctor DIR [ARGS...]: runs the doctor on the tree; output in $tmp/out,
# exit status in $rc.
doctor() {
    r=$1
    shift
    TERN_DOCTOR_ROOT=$r "$cli" doctor --quick --xclbins "$r/xclbins" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# line CASE TEXT: the output has exactly this line.
line() {
    checks=$((checks + 1))
    if grep -qxF -- "$2" "$tmp/out"; then
        printf 'ok: %s: %s\n' "$1" "$2"
    else
        failures=$((failures + 1))
        printf 'FAIL: %s: no line [%s] in:\n' "$1" "$2" >&2
        cat "$tmp/out" "$tmp/err" >&2
    fi
}

# no_line CASE PATTERN: no line matches (a fixed string).
no_line() {
    checks=$((checks + 1))
    if grep -qF -- "$2" "$tmp/out"; then
        failures=$((failures + 1))
        printf 'FAIL: %s: unexpected [%s] in:\n' "$1" "$2" >&2
        cat "$tmp/out" >&2
    else
        printf 'ok: %s: no [%s]\n' "$1" "$2"
    fi
}

status() { # CASE EXPECTED
    checks=$((checks + 1))
    if [ "$rc" = "$2" ]; then
        printf 'ok: %s: exit %s\n' "$1" "$2"
    else
        failures=$((failures + 1))
        printf 'FAIL: %s: exit %s, expected %s\n' "$1" "$rc" "$2" >&2
        cat "$tmp/out" "$tmp/err" >&2
    fi
}

t=$tmp/t

# ---- everything right, but no kernels ship
tree "$t"
doctor "$t" --backend xrt
status "no kernels, --backend xrt" 3
line "no kernels" "  OK    CPU: AMD Ryzen AI 9 HX 370 w/ Radeon 890M"
line "no kernels" "  INFO  memory bandwidth: not measured"
line "no kernels" "  OK    NPU device: /dev/accel/accel0 opens"
line "no kernels" "  OK    amdxdna driver: version 0.6"
line "no kernels" "  OK    NPU firmware: 1.1.2.65"
line "no kernels" "  OK    Linux kernel: 6.12.9-amd64"
line "no kernels" "  OK    memlock limit: unlimited"
line "no kernels" "  OK    XRT: 2.18.0"
line "no kernels" "  OK    XRT devices: XRT sees 1 device"
line "no kernels" "  FAIL  NPU kernels: no kernel images ship in $t/xclbins yet"
line "no kernels" "        fix: nothing to do: the NPU backend waits for its kernels, and Tern runs on the CPU"
line "no kernels" "backend xrt: cannot run: no kernel images ship in $t/xclbins yet"
checks=$((checks + 1))
if [ "$(grep -c '^  FAIL' "$tmp/out")" = 1 ]; then
    echo "ok: no kernels: the manifest is the only failure"
else
    failures=$((failures + 1)); echo "FAIL: no kernels: more than one failure" >&2; cat "$tmp/out" >&2
fi
doctor "$t"
status "no kernels, --backend auto" 0
line "no kernels, auto" "backend auto: the CPU (xrt: no kernel images ship in $t/xclbins yet)"
doctor "$t" --backend cpu
status "no kernels, --backend cpu" 0
line "no kernels, cpu" "backend cpu: can run"

# Without --xclbins: the build tree's copy of the manifest (BUILD/xclbins).
build=$(cd "$(dirname "$cli")/.." && pwd -P)
TERN_DOCTOR_ROOT=$t "$cli" doctor --quick >"$tmp/out" 2>"$tmp/err"
rc=$?
status "build tree's manifest" 0
line "build tree's manifest" "  FAIL  NPU kernels: no kernel images ship in $build/xclbins yet"
TERN_XCLBIN_DIR=$t/xclbins TERN_DOCTOR_ROOT=$t "$cli" doctor --quick >"$tmp/out" 2>"$tmp/err"
line "TERN_XCLBIN_DIR" "  FAIL  NPU kernels: no kernel images ship in $t/xclbins yet"

# ---- no device, driver not loaded / loaded
tree "$t"
rm -rf "$t/dev/accel" "$t/sys/module/amdxdna" "$t/sys/class/accel"
doctor "$t" --backend xrt
status "no device" 3
line "no device" "  FAIL  NPU device: no /dev/accel/accel* node"
line "no device" "        fix: load the driver: 'sudo modprobe amdxdna' (in Linux 6.14 and newer; older kernels need github.com/amd/xdna-driver). Without a Ryzen AI NPU there is nothing to do: Tern runs on the CPU"
line "no device" "  FAIL  amdxdna driver: not loaded"
line "no device" "  INFO  NPU firmware: version unknown"
doctor "$t"
status "no device, auto" 0
mkdir -p "$t/sys/module/amdxdna"
doctor "$t" --backend xrt
status "no device, driver loaded" 3
line "no device, driver loaded" "        fix: the amdxdna driver is loaded but made no device: 'sudo dmesg | grep amdxdna' says why (usually firmware it cannot load, or whose protocol it rejects)"

# ---- the device is there, the user is not in its group
tree "$t"
printf 'render:x:%s:\n' "$dev_gid" >"$t/etc/group"
sed -i "s/^Groups:.*/Groups:\t$other_gid/" "$t/proc/self/status"
doctor "$t" --backend xrt
status "not in group" 3
line "not in group" "  FAIL  NPU device: /dev/accel/accel0 is not open to this user (mode 0660, group render)"
line "not in group" "        fix: 'sudo usermod -aG render \$USER', then log out and in again"
# Without the device, the version comes from sysfs still.
line "not in group" "  OK    NPU firmware: 1.1.2.65"

# ---- in the group per /etc/group, but this session predates it
tree "$t"
sed -i "s/^Groups:.*/Groups:\t$other_gid/" "$t/proc/self/status"
doctor "$t" --backend xrt
status "joined, no re-login" 3
line "joined, no re-login" "  FAIL  NPU device: /dev/accel/accel0 is not open to this user (mode 0660, group render)"
line "joined, no re-login" "        fix: you are in the 'render' group, but this session started before you joined it: log out and in again"

# ---- a node nobody may open (mode 000)
tree "$t"
chmod 000 "$t/dev/accel/accel0"
doctor "$t" --backend xrt
status "mode 000" 3
line "mode 000" "  FAIL  NPU device: /dev/accel/accel0 is not open to this user (mode 0000, group render)"
line "mode 000" "        fix: its group may not open it either: add a udev rule, e.g. 'SUBSYSTEM==\"accel\", KERNEL==\"accel*\", GROUP=\"render\", MODE=\"0660\"' in /etc/udev/rules.d/70-amdxdna.rules, then 'sudo udevadm control --reload && sudo udevadm trigger'"
chmod 0660 "$t/dev/accel/accel0"

# ---- memlock too low
tree "$t"
printf 'Max locked memory         8388608              8388608              bytes\n' >"$t/proc/self/limits"
doctor "$t" --backend xrt
status "memlock" 3
line "memlock" "  FAIL  memlock limit: 8 MiB, below the 1.0 GiB the NPU's buffers pin"
line "memlock" "        fix: add '* soft memlock unlimited' and '* hard memlock unlimited' to /etc/security/limits.d/99-npu.conf and log in again (a systemd service: LimitMEMLOCK=infinity)"
printf 'Max locked memory         4294967296           4294967296           bytes\n' >"$t/proc/self/limits"
doctor "$t" --backend xrt
line "memlock 4 GiB" "  OK    memlock limit: 4.0 GiB (needs 1.0 GiB)"

# Against a model's size (-m): a tiny model of 140 KiB of weights.
"$cli" mkmodel --arch llama --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 16 --ff 64 -o "$tmp/tiny.gguf" >"$tmp/mk.log" 2>&1 ||
    { echo "mkmodel failed: $(cat "$tmp/mk.log")" >&2; exit 1; }
printf 'Max locked memory         65536                65536                bytes\n' >"$t/proc/self/limits"
doctor "$t" --backend xrt -m "$tmp/tiny.gguf"
status "memlock, model" 3
line "memlock, model" "  FAIL  memlock limit: 64 KiB, below the 140 KiB the NPU's buffers pin"
line "decode bound, no bandwidth" "  INFO  decode bound for Random llama 9.2K-shape (F32): needs the bandwidth (88 KiB read per token)"
printf 'Max locked memory         8388608              8388608              bytes\n' >"$t/proc/self/limits"
doctor "$t" --backend xrt -m "$tmp/tiny.gguf"
line "memlock, model" "  OK    memlock limit: 8 MiB (needs 140 KiB)"
printf 'GGUF garbage' >"$tmp/bad.gguf"
doctor "$t" -m "$tmp/bad.gguf"
status "-m garbage" 2

# ---- firmware too old, too new
tree "$t"
echo 1.0.0.166 >"$t/sys/class/accel/accel0/device/fw_version"
doctor "$t" --backend xrt
status "firmware old" 3
line "firmware old" "  FAIL  NPU firmware: 1.0.0.166 is older than 1.1"
line "firmware old" "        fix: update linux-firmware (the amdnpu/ files) to the release your amdxdna driver names, then reboot"
echo 2.0.0.12 >"$t/sys/class/accel/accel0/device/fw_version"
doctor "$t" --backend xrt
status "firmware new" 3
line "firmware new" "  FAIL  NPU firmware: 2.0.0.12 is newer than the 1.x this check knows"
line "firmware new" "        fix: firmware and driver must speak the same protocol: install the amdxdna driver released with this firmware, or the firmware your driver names"

# ---- amdxdna too old
tree "$t"
echo 0.1 >"$t/sys/module/amdxdna/version"
doctor "$t" --backend xrt
status "amdxdna old" 3
line "amdxdna old" "  FAIL  amdxdna driver: version 0.1 is older than 0.6"
line "amdxdna old" "        fix: install a newer amdxdna: a newer kernel, or the driver from github.com/amd/xdna-driver"
rm "$t/sys/module/amdxdna/version"
doctor "$t" --backend xrt
line "amdxdna in-tree" "  INFO  amdxdna driver: loaded, version unknown (it is asked through the device, which did not open)"

# ---- kernel older than 6.10
tree "$t"
echo 6.1.0-28-amd64 >"$t/proc/sys/kernel/osrelease"
doctor "$t" --backend xrt
status "kernel" 3
line "kernel" "  FAIL  Linux kernel: 6.1.0-28-amd64 is older than 6.10, which amdxdna needs"
line "kernel" "        fix: install a newer kernel (Debian 12: linux-image-amd64 from bookworm-backports)"

# ---- XRT does not see the device: its plugin is missing
tree "$t"
printf 'version=2.18.0\ndevices=0\nlib_dir=/opt/xilinx/xrt/lib\n' >"$t/xrt.fake"
rm "$t/opt/xilinx/xrt/lib/libxrt_driver_xdna.so"
doctor "$t" --backend xrt
status "plugin missing" 3
line "plugin missing" "  OK    NPU device: /dev/accel/accel0 opens"
line "plugin missing" "  FAIL  XRT devices: XRT sees none although /dev/accel/accel0 exists: its xdna plugin is missing"
line "plugin missing" "        fix: install the xdna plugin (libxrt_driver_xdna.so, from github.com/amd/xdna-driver's packages) into /opt/xilinx/xrt/lib"
line "plugin missing" "backend xrt: cannot run: XRT 2.18.0 finds no device, and its xdna plugin (libxrt_driver_xdna.so) is not in /opt/xilinx/xrt/lib"

# ---- XRT too old (Debian 12's), and XRT not built in
tree "$t"
printf 'version=2.13.0\ndevices=1\n' >"$t/xrt.fake"
doctor "$t" --backend xrt
status "XRT 2.13" 3
line "XRT 2.13" "  FAIL  XRT: 2.13.0 cannot open hardware contexts on the NPU; it needs 2.17 or newer with the xdna plugin"
line "XRT 2.13" "backend xrt: cannot run: XRT 2.13 cannot open hardware contexts on the NPU; it needs 2.17 or newer with the xdna plugin"
rm "$t/xrt.fake"
doctor "$t" --backend xrt
status "no XRT" 3
line "no XRT" "  FAIL  XRT: not built into this Tern"
line "no XRT" "  INFO  XRT devices: not asked (no XRT)"

# ---- a manifest with a wrong sha256, and one that is garbage
tree "$t"
printf 'pretend kernel' >"$t/xclbins/mm_q4_0.xclbin"
printf '{"format": 1, "kernels": [{"image": "mm_q4_0.xclbin", "op": "matmul", "type": "q4_0", "sha256": "%s"}]}\n' \
    0000000000000000000000000000000000000000000000000000000000000000 >"$t/xclbins/manifest.json"
right=$(sha256sum "$t/xclbins/mm_q4_0.xclbin" | cut -d' ' -f1)
doctor "$t" --backend xrt
status "wrong sha256" 3
line "wrong sha256" "  FAIL  $t/xclbins/mm_q4_0.xclbin: sha256 $right does not match the manifest's 0000000000000000000000000000000000000000000000000000000000000000 (a damaged or replaced kernel image: reinstall Tern)"
line "wrong sha256" "        fix: reinstall Tern: a kernel image does not match its checksum"
printf '{"format": 1, "kernels": [{"image": "mm_q4_0.xclbin", "op": "matmul", "type": "q4_0", "sha256": "%s"}]}\n' \
    "$right" >"$t/xclbins/manifest.json"
doctor "$t" --backend xrt
status "right sha256, no compute path" 3
line "right sha256" "  FAIL  NPU kernels: 1 image verifies, but this Tern has no NPU compute path yet"
line "right sha256" "backend xrt: cannot run: the kernel images verify, but this Tern has no NPU compute path yet"
printf '{"format": 1, "kernels": [' >"$t/xclbins/manifest.json"
doctor "$t" --backend xrt
status "manifest garbage" 3
line "manifest garbage" "        fix: reinstall Tern: its kernel manifest is damaged"
rm "$t/xclbins/manifest.json"
doctor "$t" --backend xrt
line "manifest missing" "  FAIL  NPU kernels: $t/xclbins/manifest.json is missing"

# ---- garbage in every file the doctor reads: lines, never a crash
tree "$t"
for f in sys/class/accel/accel0/device/fw_version sys/class/accel/accel0/device/vbnv \
    sys/module/amdxdna/version proc/cpuinfo proc/sys/kernel/osrelease proc/self/limits \
    proc/self/status etc/group etc/passwd xrt.fake xclbins/manifest.json; do
    head -c 3000 /dev/urandom >"$t/$f"
done
doctor "$t" --backend xrt
status "garbage" 3
no_line "garbage" "runtime error"
checks=$((checks + 1))
n=$(grep -cE '^  (OK|INFO|FAIL) ' "$tmp/out")
if [ "$n" = 13 ]; then # 12 checks + the repack cache's line
    echo "ok: garbage: 13 lines"
else
    failures=$((failures + 1)); echo "FAIL: garbage: $n lines" >&2; cat "$tmp/out" "$tmp/err" >&2
fi
# Colons, huge numbers, empty files.
for f in sys/class/accel/accel0/device/fw_version sys/module/amdxdna/version \
    proc/sys/kernel/osrelease proc/self/limits proc/self/status etc/group etc/passwd; do
    printf '::::\n99999999999999999999.99999999999999.1.1\nUid:\nGroups:\t-1 x\nMax locked memory\n' >"$t/$f"
done
doctor "$t" --backend xrt
status "odd values" 3
: >"$t/proc/self/status"
: >"$t/proc/self/limits"
doctor "$t"
status "empty files" 0
line "empty files" "  INFO  memlock limit: unknown (/proc/self/limits)"

# ---- usage
doctor "$t" --backend gpu
status "bad backend" 1
doctor "$t" --frobnicate
status "unknown option" 1
doctor "$t" -m "$tmp/no-such-model.gguf"
status "missing model" 2

# ---- run and bench --backend (decided before the model loads, on this
# machine: the XRT backend refuses everywhere today)
"$cli" run -m "$tmp/no-such-model.gguf" -p hi --backend xrt >"$tmp/out" 2>&1
rc=$?
status "run --backend xrt falls back, then the model is missing" 2
checks=$((checks + 1))
if grep -q '^tern-cli: xrt: .*; using the CPU$' "$tmp/out"; then
    echo "ok: run --backend xrt: says why and that the CPU runs"
else
    failures=$((failures + 1)); echo "FAIL: run --backend xrt: no fallback line" >&2; cat "$tmp/out" >&2
fi
"$cli" run -m "$tmp/no-such-model.gguf" -p hi --backend xrt --no-fallback >"$tmp/out" 2>&1
rc=$?
status "run --backend xrt --no-fallback" 3
no_line "run --no-fallback" "using the CPU"
"$cli" bench --backend xrt --no-fallback -m "$tmp/no-such-model.gguf" >"$tmp/out" 2>&1
rc=$?
status "bench --backend xrt --no-fallback" 3
"$cli" run --backend tpu -m "$tmp/no-such-model.gguf" >"$tmp/out" 2>&1
rc=$?
status "run --backend tpu" 1
"$cli" run -m "$tmp/no-such-model.gguf" -p hi --backend cpu >"$tmp/out" 2>&1
rc=$?
status "run --backend cpu" 2
no_line "run --backend cpu" "xrt"

# ---- the repack cache (docs/QUANT.md, "The repack cache"): where it is,
# how much it holds, and the page verdict a load left in DIR/pages (for
# this file system and kernel: the engine ignores another's).
# cache_doctor ENV-ARGS...: the doctor under env(1) with these arguments
# (-u first), output in $tmp/out.
cache_doctor() {
    env "$@" "$cli" doctor --quick --xclbins "$t/xclbins" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
# verdict DIR 4k|2m: what a load would have written there.
verdict() {
    mkdir -p "$1"
    printf 'tern repack pages 1\ndevice %s\nfstype %s\nkernel %s\npages %s\n' \
        "$(stat -c %d "$1")" "$(stat -f -c %t "$1")" "$(uname -r)" "$2" >"$1/pages"
}
tree "$t"
rc_dir=$tmp/repack
mkdir -p "$rc_dir"
head -c 2048 /dev/zero >"$rc_dir/0123456789abcdef0123456789abcdef.x16"
verdict "$rc_dir" 4k
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE="$rc_dir"
status "repack cache asked for" 0
line "repack cache asked for, 4 KiB" \
    "  INFO  repack cache: $rc_dir (TERN_REPACK_CACHE), files: 1, 2 KiB; 4 KiB pages on this kernel and file system, used anyway"
xdg=$tmp/xdg
verdict "$xdg/tern/repack" 4k
cache_doctor -u TERN_REPACK_CACHE TERN_DOCTOR_ROOT="$t" XDG_CACHE_HOME="$xdg"
line "repack cache default, 4 KiB" \
    "  INFO  repack cache: $xdg/tern/repack (default), files: 0, 0 KiB; 4 KiB pages on this kernel and file system: the weights stay in private memory"
verdict "$xdg/tern/repack" 2m
cache_doctor -u TERN_REPACK_CACHE TERN_DOCTOR_ROOT="$t" XDG_CACHE_HOME="$xdg"
line "repack cache default, 2 MiB" \
    "  OK    repack cache: $xdg/tern/repack (default), files: 0, 0 KiB; mapped in 2 MiB pages"
# A verdict of another kernel: not this one's.
sed -i 's/^kernel .*/kernel 0.0-other/' "$xdg/tern/repack/pages"
cache_doctor -u TERN_REPACK_CACHE TERN_DOCTOR_ROOT="$t" XDG_CACHE_HOME="$xdg"
line "repack cache default, another kernel's verdict" \
    "  OK    repack cache: $xdg/tern/repack (default), files: 0, 0 KiB; pages not checked yet (a load of a model of 8 MiB or more checks)"
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE=0
line "repack cache off" "  INFO  repack cache: off (TERN_REPACK_CACHE=0)"
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE=yes
line "repack cache not understood" "  INFO  repack cache: off: TERN_REPACK_CACHE=yes is not understood"
line "repack cache not understood" "        fix: unset it for the default, or set 0 or off, 1 or on, or an absolute directory"
status "repack cache not understood" 0
# A cache folder a load cannot create: the line says so (a load then
# repacks in memory), never "OK". A file in the path, a dangling link.
: >"$tmp/a-file"
cache_doctor -u TERN_REPACK_CACHE TERN_DOCTOR_ROOT="$t" XDG_CACHE_HOME="$tmp/a-file"
status "cache under a file" 0
line "cache under a file" \
    "  INFO  repack cache: $tmp/a-file/tern/repack cannot be used (Not a directory): every load repacks the weights in memory"
line "cache under a file" \
    "        fix: set XDG_CACHE_HOME or TERN_REPACK_CACHE to a folder this user can write, or TERN_REPACK_CACHE=off"
cache_doctor -u TERN_REPACK_CACHE -u XDG_CACHE_HOME TERN_DOCTOR_ROOT="$t" HOME="$tmp/a-file"
line "HOME is a file" \
    "  INFO  repack cache: $tmp/a-file/.cache/tern/repack cannot be used (Not a directory): every load repacks the weights in memory"
ln -s "$tmp/no-such-folder" "$tmp/dangling"
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE="$tmp/dangling/repack"
line "cache under a dangling link" \
    "  INFO  repack cache: $tmp/dangling/repack cannot be used (No such file or directory): every load repacks the weights in memory"
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE="$tmp/not-yet/made/here"
line "cache not made yet" \
    "  OK    repack cache: $tmp/not-yet/made/here (TERN_REPACK_CACHE), files: 0, 0 KiB; pages not checked yet (a load of a model of 8 MiB or more checks)"
cache_doctor -u TERN_REPACK_CACHE -u XDG_CACHE_HOME -u HOME TERN_DOCTOR_ROOT="$t"
status "no HOME" 0
line "no HOME" "  INFO  repack cache: off: neither XDG_CACHE_HOME nor HOME is an absolute path"
line "no HOME" "        fix: set HOME, or XDG_CACHE_HOME or TERN_REPACK_CACHE to an absolute folder this user can write"

# ---- TERN_ISA that names no kernel family: ignored, and said so
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE=0 TERN_ISA=avx-2
status "TERN_ISA not understood" 0
checks=$((checks + 1))
if grep -qE '^  INFO  CPU kernels: (scalar|avx2|avx512); TERN_ISA=avx-2 is not understood and is ignored$' "$tmp/out"; then
    echo "ok: TERN_ISA not understood: said"
else
    failures=$((failures + 1)); echo "FAIL: TERN_ISA not understood: not said" >&2; cat "$tmp/out" >&2
fi
line "TERN_ISA not understood" \
    "        fix: unset TERN_ISA, or set it to scalar, avx2 or avx512 to cap the kernels"
cache_doctor TERN_DOCTOR_ROOT="$t" TERN_REPACK_CACHE=0 TERN_ISA=scalar
line "TERN_ISA=scalar" "  INFO  CPU kernels: scalar"
no_line "TERN_ISA=scalar" "not understood"

# ---- -m TAG with a model store that cannot be made: a FIFO or a dangling
# link where the models folder goes. Exit 2, the path, and what to do.
if "$cli" list --help >/dev/null 2>&1; then # built with the model manager
    for kind in fifo dangling; do
        data=$tmp/data-$kind
        mkdir -p "$data/tern"
        if [ $kind = fifo ]; then mkfifo "$data/tern/models"; else ln -s "$tmp/gone" "$data/tern/models"; fi
        XDG_DATA_HOME=$data "$cli" doctor --quick -m qwen3:0.6b >"$tmp/out" 2>"$tmp/err"
        rc=$?
        status "models folder: $kind" 2
        checks=$((checks + 1))
        if grep -qF "$data/tern/models/packages: cannot create the model store (" "$tmp/err" &&
            grep -qF "): move away the file or broken link in its way, or set XDG_DATA_HOME to a folder this user can write" "$tmp/err"; then
            echo "ok: models folder: $kind: $(cat "$tmp/err")"
        else
            failures=$((failures + 1)); echo "FAIL: models folder: $kind: $(cat "$tmp/err")" >&2
        fi
    done
fi

printf 'doctor: %d checks, %d failed\n' "$checks" "$failures"
[ "$failures" -eq 0 ]
