#!/usr/bin/env bash
# The Raspberry Pi kit on aarch64, emulated: a Debian bookworm arm64 userland (the base of Raspberry Pi OS,
# Python 3.11) built with debootstrap, run through qemu-user-static; the kit's requirements installed there from
# the package index as a Pi installs them; the kit's self-check run under emulation and compared with the same
# self-check on this machine (outputs within 1e-6, flags identical).
#
#   sudo scripts/pi_emulated_check.sh <kit dir>        # full check (prints one JSON line of figures)
#   sudo scripts/pi_emulated_check.sh --prepare        # only build the arm64 userland (cached)
#
# Needs root, debootstrap and qemu-user-static (apt-get install debootstrap qemu-user-static) and network access to
# the Debian mirror and the package index. The userland is cached in $FLEXLEARN_PI_ROOTFS
# (default /var/tmp/flexlearn-pi-bookworm-arm64; delete it to start over); the venv inside it is made fresh on
# every run, so the install figures (time, size, packages) are those of a Pi. Exit status: 0 passed, 1 the
# self-check, the comparison or the install failed, 2 a missing tool, a bad argument, or the Debian mirror or the
# package index out of reach (one line on stderr).
set -euo pipefail

ROOTFS="${FLEXLEARN_PI_ROOTFS:-/var/tmp/flexlearn-pi-bookworm-arm64}"
HOST_PYTHON="${FLEXLEARN_HOST_PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}"
die() { echo "pi_emulated_check: $*" >&2; exit 2; }

[ $# -eq 1 ] || die "usage: $0 <kit dir> | --prepare"
KIT=""
if [ "$1" != "--prepare" ]; then
  KIT="$(cd "$1" 2>/dev/null && pwd)" || die "kit dir '$1': not a directory"
  [ -f "$KIT/pi_runner.py" ] && [ -f "$KIT/requirements.txt" ] || die "kit dir '$1': no pi_runner.py or requirements.txt (write one with flexlearn-export ... kit=<dir>)"
fi
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, binfmt_misc)"
command -v debootstrap >/dev/null || die "debootstrap not installed (apt-get install debootstrap)"
[ -x /usr/bin/qemu-aarch64-static ] || die "qemu-aarch64-static not installed (apt-get install qemu-user-static)"

# --- qemu as the aarch64 interpreter of the kernel (binfmt_misc)
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc on /proc/sys/fs/binfmt_misc"
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  [ -f /usr/lib/binfmt.d/qemu-aarch64.conf ] || die "/usr/lib/binfmt.d/qemu-aarch64.conf missing (qemu-user-static)"
  grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf | head -n1 > /proc/sys/fs/binfmt_misc/register \
    || die "cannot register qemu-aarch64 with binfmt_misc"
fi

# --- the arm64 userland (cached)
t0=$(date +%s)
if [ ! -f "$ROOTFS/.flexlearn-ready" ]; then
  mirror="$(grep -h -m1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -n1)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  rm -rf "$ROOTFS"
  debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$ROOTFS" "$mirror" \
    > "$ROOTFS.debootstrap.log" 2>&1 || die "debootstrap failed (log: $ROOTFS.debootstrap.log)"
  touch "$ROOTFS/.flexlearn-ready"
fi
t_rootfs=$(( $(date +%s) - t0 ))
[ -n "$KIT" ] || { echo "{\"rootfs\": \"$ROOTFS\", \"rootfs_s\": $t_rootfs}"; exit 0; }

# --- the host's pip configuration and CA bundle, the kit
mkdir -p "$ROOTFS/etc/xdg/pip" "$ROOTFS/etc/ssl/certs"
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOTFS/etc/pip.conf"
[ -d /etc/xdg/pip ] && cp -r /etc/xdg/pip/. "$ROOTFS/etc/xdg/pip/"
cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf" 2>/dev/null || true
rm -rf "$ROOTFS/opt/kit" "$ROOTFS/opt/venv" "$ROOTFS/opt/selfcheck.json"
mkdir -p "$ROOTFS/opt"
cp -r "$KIT" "$ROOTFS/opt/kit"

mounted=()
cleanup() { for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
for fs in proc sys dev; do
  mkdir -p "$ROOTFS/$fs"
  mount --bind "/$fs" "$ROOTFS/$fs" && mounted=("$ROOTFS/$fs" "${mounted[@]}")
done
inside() {
  chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DEFAULT_TIMEOUT=180 PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
}

# --- install as on the Pi
t0=$(date +%s)
inside python3 -m venv /opt/venv
# as the kit's README says: --no-deps (requirements.txt lists what running the bundles imports)
if ! inside /opt/venv/bin/pip install -q --no-deps -r /opt/kit/requirements.txt > "$ROOTFS.pip.log" 2>&1; then
  tail -n 5 "$ROOTFS.pip.log" >&2
  # the index out of reach is the machine's problem (exit 2); a requirement it cannot serve for aarch64 is the kit's
  grep -qE "NewConnectionError|Temporary failure in name resolution|Max retries exceeded|ProxyError|Could not fetch URL" \
    "$ROOTFS.pip.log" && die "the package index is out of reach from the arm64 userland (log: $ROOTFS.pip.log)"
  echo "pi_emulated_check: pip install -r requirements.txt failed (log: $ROOTFS.pip.log)" >&2
  exit 1
fi
t_install=$(( $(date +%s) - t0 ))
site="$(ls -d "$ROOTFS"/opt/venv/lib/python3*/site-packages)"
size_mb=$(du -sm --exclude=__pycache__ "$site" | awk '{print $1}')  # the files installed (pip, setuptools included)
size_pyc_mb=$(du -sm "$site" | awk '{print $1}')  # with the bytecode pip compiles
n_packages=$(inside /opt/venv/bin/pip list --format=freeze 2>/dev/null | grep -v -E '^(pip|setuptools|wheel)==' | wc -l)
cuda=$(ls "$site"/torch/lib 2>/dev/null | grep -c -i cuda || true)
python_v=$(inside /opt/venv/bin/python -c 'import platform, torch; print(platform.machine(), platform.python_version(), torch.__version__)')

# --- the self-check under emulation, then on this machine; the two compared
t0=$(date +%s)
rc=0
inside /opt/venv/bin/python /opt/kit/pi_runner.py --self-check --self-check-out /opt/selfcheck.json || rc=$?
t_check=$(( $(date +%s) - t0 ))
host_out="$(mktemp -d)"
"$HOST_PYTHON" "$KIT/pi_runner.py" --self-check --self-check-out "$host_out/selfcheck.json" || rc=$((rc ? rc : 1))
"$HOST_PYTHON" "$KIT/pikit/selfcheck.py" compare "$host_out/selfcheck.json" "$ROOTFS/opt/selfcheck.json" || rc=1
rm -rf "$host_out"
printf '{"machine_python_torch": "%s", "rootfs_s": %d, "install_s": %d, "site_packages_mb": %d, "site_packages_with_bytecode_mb": %d, "packages": %d, "cuda_libs": %d, "selfcheck_s": %d, "passed": %s}\n' \
  "$python_v" "$t_rootfs" "$t_install" "$size_mb" "$size_pyc_mb" "$n_packages" "$cuda" "$t_check" "$([ $rc -eq 0 ] && echo true || echo false)"
exit $rc
