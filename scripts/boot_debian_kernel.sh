#!/usr/bin/env bash
# Boots a Debian kernel package with minivmm (or, for comparison, QEMU) and a busybox initramfs.
#
#   scripts/boot_debian_kernel.sh [options] [PACKAGE]
#
# PACKAGE defaults to linux-image-cloud-amd64; a metapackage is resolved to the real image
# package it depends on (linux-image-6.1.0-NN-cloud-amd64). The steps:
#   1. `apt-get download` PACKAGE and busybox-static into the cache directory
#      (${MINIVMM_CACHE:-${XDG_CACHE_HOME:-~/.cache}/minivmm}); `apt-get update` only if the
#      download fails. Nothing is installed: `dpkg-deb -x` unpacks into the cache.
#   2. scripts/make_initramfs.sh: busybox + an /init that prints MINIVMM-INITRAMFS-OK and
#      reboots (reboot=k: through the i8042, which minivmm turns into exit code 0).
#   3. --format vmlinux: scripts/extract_vmlinux.py pulls the ELF vmlinux out of the bzImage,
#      and minivmm boots it through its PVH entry; --format bzimage boots /boot/vmlinuz-* through
#      the 64-bit boot protocol.
#   4. Runs the VMM under `timeout`, prefixing every console/stderr line with the host time in
#      seconds since the VMM started, into the log file; prints milestone times at the end.
#
# Exit status: the VMM's (minivmm: 0 guest reset, 10 emulation failure, see docs/exit-codes.md),
# 124 when --timeout expired, 1 when fetching or preparing failed, 2 for bad usage.
#
# Options:
#   --vmm minivmm|qemu     which VMM to run (default minivmm)
#   --format bzimage|vmlinux   kernel format to boot (default vmlinux)
#   --minivmm PATH         minivmm binary (default: $MINIVMM, else build/vmm/minivmm in the repo)
#   --memory SIZE          guest RAM (default 256M)
#   --cmdline "ARGS"       replace the default kernel command line
#   --append "ARGS"        add to the kernel command line
#   --timeout SECONDS      stop the VMM after this long (default 1800)
#   --log FILE             log file (default: CACHE/logs/PACKAGE-FORMAT-VMM.log)
#   --prepare-only         fetch and build everything, print the paths, boot nothing
#   --refresh              download the packages again even if the cache has them
#   Anything after `--` goes to the VMM verbatim (e.g. -- --cpu host --stats -).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${MINIVMM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minivmm}

# The command line both VMMs get. noxsave: this host's KVM cannot emulate xrstor, and CPUID's
# XSAVE bit cannot be hidden here. CX16 (`lock cmpxchg16b`, which this host cannot emulate
# either) is hidden by minivmm's --cpu baseline and by QEMU's -cpu host,-cx16.
default_cmdline="console=ttyS0 earlyprintk=serial,ttyS0,115200 noxsave reboot=k panic=-1 nokaslr i8042.noaux i8042.nokbd tsc=reliable no_timer_check"

vmm=minivmm
format=vmlinux
package=linux-image-cloud-amd64
minivmm=${MINIVMM:-}
memory=256M
cmdline=$default_cmdline
append=""
timeout_s=1800
log=""
prepare_only=0
refresh=0
extra=()

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "boot_debian_kernel: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --vmm) vmm=$2; shift 2 ;;
    --format) format=$2; shift 2 ;;
    --minivmm) minivmm=$2; shift 2 ;;
    --memory) memory=$2; shift 2 ;;
    --cmdline) cmdline=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --prepare-only) prepare_only=1; shift ;;
    --refresh) refresh=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "boot_debian_kernel: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) package=$1; shift ;;
  esac
done
[[ $vmm == minivmm || $vmm == qemu ]] || { echo "--vmm must be minivmm or qemu" >&2; exit 2; }
[[ $format == bzimage || $format == vmlinux ]] || { echo "--format must be bzimage or vmlinux" >&2; exit 2; }
[[ -n $append ]] && cmdline="$cmdline $append"

SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo

# Installs Debian packages that provide missing tools (decompressors), the way setup.sh does.
ensure_tools() {
  local missing=() tool pkg
  for spec in "$@"; do
    tool=${spec%%:*}
    pkg=${spec#*:}
    command -v "$tool" >/dev/null || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "boot_debian_kernel: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}

apt_opts=()
# As root, apt-get download drops to the _apt user, which cannot write into ~/.cache.
[[ $(id -u) -eq 0 ]] && apt_opts=(-o APT::Sandbox::User=root)
apt_updated=0
apt_update_once() {
  ((apt_updated)) && return 0
  echo "boot_debian_kernel: apt-get update" >&2
  $SUDO apt-get update -qq >&2
  apt_updated=1
}

# linux-image-cloud-amd64 -> linux-image-6.1.0-NN-cloud-amd64 (the candidate's dependency).
resolve_image_package() {
  local pkg=$1 depth dep
  for depth in 1 2 3; do
    if [[ $pkg =~ ^linux-image-[0-9] ]]; then
      echo "$pkg"
      return 0
    fi
    dep=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null |
          sed -n 's/^Depends: //p' | tr ',' '\n' | sed 's/^ *//; s/[ |].*//' |
          grep -E '^linux-image-' | head -1) || true
    if [[ -z $dep ]]; then
      if ((apt_updated == 0)); then
        apt_update_once
        continue
      fi
      # Not a metapackage we can follow: try it as is.
      echo "$pkg"
      return 0
    fi
    pkg=$dep
  done
  echo "$pkg"
}

# Downloads PACKAGE's .deb into the cache (unless there already) and prints its path.
fetch_deb() {
  local pkg=$1 deb
  deb=$(ls -t "$cache"/debs/"${pkg}"_*.deb 2>/dev/null | head -1 || true)
  if [[ -n $deb && $refresh -eq 0 ]]; then
    echo "$deb"
    return 0
  fi
  mkdir -p "$cache/debs"
  if ! (cd "$cache/debs" && apt-get "${apt_opts[@]}" download "$pkg" >&2); then
    apt_update_once
    (cd "$cache/debs" && apt-get "${apt_opts[@]}" download "$pkg" >&2) ||
      die "apt-get download $pkg failed"
  fi
  deb=$(ls -t "$cache"/debs/"${pkg}"_*.deb 2>/dev/null | head -1 || true)
  [[ -n $deb ]] || die "apt-get download $pkg left no .deb in $cache/debs"
  echo "$deb"
}

# Unpacks a .deb once into CACHE/extract/<deb name>/ and prints that directory.
unpack_deb() {
  local deb=$1 dir
  dir="$cache/extract/$(basename "$deb" .deb)"
  if [[ ! -f $dir/.done ]]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    dpkg-deb -x "$deb" "$dir"
    touch "$dir/.done"
  fi
  echo "$dir"
}

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  die "needs a Debian system (apt-get, dpkg-deb)"
command -v python3 >/dev/null || die "needs python3"
mkdir -p "$cache"

image_pkg=$(resolve_image_package "$package")
[[ $image_pkg == "$package" ]] || echo "boot_debian_kernel: $package -> $image_pkg" >&2
kdir=$(unpack_deb "$(fetch_deb "$image_pkg")")
bzimage=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -1 || true)
[[ -n $bzimage ]] || die "$image_pkg has no /boot/vmlinuz-*"
bbdir=$(unpack_deb "$(fetch_deb busybox-static)")
[[ -x $bbdir/bin/busybox ]] || die "busybox-static has no /bin/busybox"

initrd="$cache/initramfs-busybox.cpio.gz"
if [[ ! -f $initrd || $initrd -ot $bbdir/bin/busybox || $initrd -ot $repo/scripts/make_initramfs.sh ]]; then
  bash "$repo/scripts/make_initramfs.sh" "$bbdir/bin/busybox" "$initrd.tmp.$$"
  mv "$initrd.tmp.$$" "$initrd"
fi

kernel=$bzimage
if [[ $format == vmlinux ]]; then
  kernel="$kdir/vmlinux-$(basename "$bzimage" | sed 's/^vmlinuz-//')"
  if [[ ! -f $kernel || $kernel -ot $bzimage ]]; then
    ensure_tools lz4:lz4 zstd:zstd xz:xz-utils
    python3 "$repo/scripts/extract_vmlinux.py" "$bzimage" "$kernel.tmp.$$" --require-pvh
    mv "$kernel.tmp.$$" "$kernel"
  fi
fi

if ((prepare_only)); then
  echo "package=$image_pkg"
  echo "bzimage=$bzimage"
  [[ $format == vmlinux ]] && echo "vmlinux=$kernel"
  echo "initrd=$initrd"
  echo "cmdline=$cmdline"
  exit 0
fi

if [[ $vmm == minivmm ]]; then
  if [[ -z $minivmm ]]; then
    [[ -x $repo/build/vmm/minivmm ]] && minivmm=$repo/build/vmm/minivmm
  fi
  [[ -n $minivmm && -x $minivmm ]] ||
    die "no minivmm binary: build it (ninja -C build minivmm) and pass --minivmm PATH or set MINIVMM"
  cmd=("$minivmm" run --kernel "$kernel" --initrd "$initrd" --memory "$memory"
       --cmdline "$cmdline" --no-console-input ${extra[@]+"${extra[@]}"})
else
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed"
  # The configuration the issue measured: KVM, host CPU without CX16, the serial console on
  # stdio, no reboot (a reset ends QEMU with status 0, like minivmm).
  cmd=(qemu-system-x86_64 -enable-kvm -cpu host,-cx16 -machine pc -m "$memory" -nographic
       -nic none -no-reboot -kernel "$kernel" -initrd "$initrd" -append "$cmdline"
       ${extra[@]+"${extra[@]}"})
fi

[[ -n $log ]] || log="$cache/logs/$image_pkg-$format-$vmm.log"
mkdir -p "$(dirname "$log")"
{
  echo "# $(date -u +%FT%TZ) $vmm $format $image_pkg"
  printf '# command:'; printf ' %q' "${cmd[@]}"; echo
} > "$log"
echo "boot_debian_kernel: booting $(basename "$kernel") with $vmm (timeout ${timeout_s}s), log: $log" >&2

# The runner: starts the VMM, prefixes every line of its output with "[  seconds]" = host time
# since the VMM started (stdout, the console, and stderr, minivmm's own report, interleaved in
# arrival order), ends it after --timeout (status 124), and ends QEMU once it has printed its
# "KVM internal error" register dump: QEMU pauses the guest there instead of exiting, so the
# runner stops it and reports status 10, minivmm's code for the same event.
runner='
import os, re, selectors, subprocess, sys, time
log, timeout, vmm, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
out = open(log, "a", buffering=1)
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT)
sel = selectors.DefaultSelector()
sel.register(p.stdout, selectors.EVENT_READ)
buf, saw_internal_error, stop_reason = b"", False, None

def emit(raw, t):
    global saw_internal_error, stop_reason
    line = raw.decode("utf-8", "replace").rstrip("\r\n").replace("\r", "")
    out.write("[%10.3f] %s\n" % (t - t0, line))
    if vmm == "qemu":
        if line.startswith("KVM internal error"):
            saw_internal_error = True
        elif saw_internal_error and line.startswith("Code="):
            stop_reason = "qemu paused the guest after a KVM internal error; stopped by the script"

while True:
    left = timeout - (time.monotonic() - t0)
    if left <= 0:
        stop_reason = "timeout after %gs" % timeout
        break
    if not sel.select(min(left, 1.0)):
        if stop_reason:
            break
        continue
    chunk = os.read(p.stdout.fileno(), 65536)
    if not chunk:
        break
    now = time.monotonic()
    buf += chunk
    while b"\n" in buf:  # a line is stamped when its newline arrives
        line, buf = buf.split(b"\n", 1)
        emit(line, now)
    if stop_reason:
        break
if buf:
    emit(buf, time.monotonic())
if stop_reason:
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    status = 124 if stop_reason.startswith("timeout") else 10
    out.write("# %s\n" % stop_reason)
else:
    status = p.wait()
out.write("# exit status %d after %.1fs\n" % (status, time.monotonic() - t0))
sys.exit(status)
'
set +e
python3 -c "$runner" "$log" "$timeout_s" "$vmm" "${cmd[@]}"
status=$?
set -e
elapsed=$(sed -n 's/^# exit status [0-9]* after \([0-9.]*\)s$/\1/p' "$log" | tail -1)

# Milestones: the first line matching each, with its host time.
summary() {
  local name re line
  while IFS='|' read -r name re; do
    line=$(grep -m1 -E "$re" "$log" || true)
    if [[ -n $line ]]; then
      printf '  %-22s at %ss\n' "$name" "$(sed -E 's/^\[ *([0-9.]+)\].*/\1/' <<<"$line")"
    else
      printf '  %-22s not reached\n' "$name"
    fi
  done <<'EOF'
Linux version|\] Linux version
Command line|\] Command line:
e820 map|BIOS-e820: \[mem
memory layout|Memory: [0-9]+K/[0-9]+K available
x87 FPU will use|x86/fpu: x87 FPU will use
initramfs marker|^\[ *[0-9.]+\] MINIVMM-INITRAMFS-OK
EOF
}
{
  echo "boot_debian_kernel: $vmm $format: exit status $status after ${elapsed}s"
  summary
  echo "  last lines:"
  grep -v '^#' "$log" | tail -n 12 | sed 's/^/    /'
} >&2
exit "$status"
