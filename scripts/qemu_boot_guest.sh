#!/usr/bin/env bash
# Boots a bzImage (normally build/guest/minivmm-guest.bin) under QEMU through its
# real-mode Linux loader, prints the guest's serial output and exits with QEMU's status.
#
#   scripts/qemu_boot_guest.sh IMAGE [CMDLINE] [extra qemu args...]
#   scripts/qemu_boot_guest.sh build/guest/minivmm-guest.bin "timer=rtc hz=1024 ticks=2048"
#
# The guest leaves through isa-debug-exit at port 0xf4, so QEMU exits with
# (value << 1) | 1: 1 = success, 3 = bad command line, 255 = guest exception,
# 124 = timeout (no exit written). Environment:
#   QEMU_ACCEL    kvm or tcg (default: kvm when /dev/kvm is usable, else tcg)
#   QEMU_TIMEOUT  seconds before giving up (default 120; the firmware alone takes a few)
set -uo pipefail

if (($# < 1)); then
  echo "usage: $0 IMAGE [CMDLINE] [extra qemu args...]" >&2
  exit 2
fi
image=$1
cmdline=${2:-}
shift $(($# >= 2 ? 2 : 1))

if [[ ! -r $image ]]; then
  echo "$0: cannot read $image" >&2
  exit 2
fi

if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
  echo "$0: installing qemu-system-x86" >&2
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y --no-install-recommends qemu-system-x86 >&2 ||
    { "${sudo[@]}" apt-get update >&2 &&
      "${sudo[@]}" apt-get install -y --no-install-recommends qemu-system-x86 >&2; } ||
    { echo "$0: could not install qemu-system-x86" >&2; exit 2; }
fi

accel=${QEMU_ACCEL:-}
if [[ -z $accel ]]; then
  if [[ -r /dev/kvm && -w /dev/kvm ]]; then accel=kvm; else accel=tcg; fi
fi

# -nodefaults: no VGA/NIC option ROMs for SeaBIOS to run; the serial port is added back.
timeout "${QEMU_TIMEOUT:-120}" qemu-system-x86_64 \
  -accel "$accel" -m 64 -nodefaults -no-user-config -display none -no-reboot \
  -serial stdio -monitor none \
  -device isa-debug-exit,iobase=0xf4,iosize=4 \
  -kernel "$image" -append "$cmdline" "$@" </dev/null
status=$?
echo "qemu exit status: $status" >&2
exit "$status"
