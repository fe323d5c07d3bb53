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
# XSAVE bit cannot be hidden here. clearcpuid=cx16: keeps SLUB off `lock cmpxchg16b`, which the
# host cannot emulate, even when the VMM's CPUID still shows CX16 (see docs/linux-guests.md).
default_cmdline="console=ttyS0 earlyprintk=serial,ttyS0,115200 noxsave clearcpuid=cx16 reboot=k panic=-1 nokaslr i8042.noaux i8042.nokbd tsc=reliable no_timer_check"

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
  bash "$repo/scripts/make_initramfs.sh" "$bbdir/bin/busybox" "$initrd"
fi

kernel=$bzimage
if [[ $format == vmlinux ]]; then
  kernel="$kdir/vmlinux-$(basename "$bzimage" | sed 's/^vmlinuz-//')"
  if [[ ! -f $kernel || $kernel -ot $bzimage ]]; then
    ensure_tools lz4:lz4 zstd:zstd xz:xz-utils
    python3 "$repo/scripts/extract_vmlinux.py" "$bzimage" "$kernel.tmp" --require-pvh
    mv "$kernel.tmp" "$kernel"
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
    for c in "$repo/build/vmm/minivmm" "$repo/../build/vmm/minivmm"; do
      [[ -x $c ]] && { minivmm=$c; break; }
    done
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
       -no-reboot -kernel "$kernel" -initrd "$initrd" -append "$cmdline"
       ${extra[@]+"${extra[@]}"})
fi

[[ -n $log ]] || log="$cache/logs/$image_pkg-$format-$vmm.log"
mkdir -p "$(dirname "$log")"
{
  echo "# $(date -u +%FT%TZ) $vmm $format $image_pkg"
  printf '# command:'; printf ' %q' "${cmd[@]}"; echo
} > "$log"
echo "boot_debian_kernel: booting $(basename "$kernel") with $vmm (timeout ${timeout_s}s), log: $log" >&2

# Every line gets "[  seconds]" = host time since the VMM started; stdout (the console) and
# stderr (minivmm's own report) are interleaved in arrival order.
stamp() {
  python3 -u -c '
import sys, time
t0 = time.monotonic()
for line in sys.stdin.buffer:
    sys.stdout.write("[%10.3f] %s" % (time.monotonic() - t0, line.decode("utf-8", "replace")))
    sys.stdout.flush()
'
}

start=$(date +%s.%N)
set +e
timeout --kill-after=30 "$timeout_s" "${cmd[@]}" </dev/null 2>&1 | stamp >> "$log"
status=${PIPESTATUS[0]}
set -e
end=$(date +%s.%N)
elapsed=$(python3 -c "print('%.1f' % ($end - $start))")
echo "# exit status $status after ${elapsed}s" >> "$log"

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
