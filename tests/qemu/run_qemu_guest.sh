#!/usr/bin/env bash
# Runs one multiboot test guest (guest/tests/) under QEMU TCG and checks its exit status and
# its COM1 output.
#
#   run_qemu_guest.sh QEMU STATUS PATTERNS ELF CMDLINE [qemu args...]
#
# STATUS    the expected exit status: isa-debug-exit makes it (value << 1) | 1, so 1 = pass,
#           3 = a check failed, 5 = bad command line
# PATTERNS  extended regular expressions separated by '@@', each of which some output line
#           must match; at least one is required, because QEMU's own start-up errors also
#           exit with status 1, the guest's pass status
# TCG runs single-threaded (thread=single): an -smp 4 guest then takes one host core, not four,
# so it does not starve the timing-sensitive tests ctest runs beside it.
# The guest gets -M pc, isa-debug-exit at 0xf4, pc-testdev, no default devices (no NIC
# option ROM to wait for) and -no-reboot (a triple fault ends QEMU with status 0).
# QEMU_GUEST_TIMEOUT (seconds, default 20) bounds the run; a timeout is status 124.
set -uo pipefail

if (($# < 5)); then
  echo "usage: $0 QEMU STATUS PATTERNS ELF CMDLINE [qemu args...]" >&2
  exit 2
fi
qemu=$1 want_status=$2 patterns=$3 elf=$4 cmdline=$5
shift 5
if [[ -z $patterns ]]; then
  echo "$0: PATTERNS must not be empty" >&2
  exit 2
fi

out=$(timeout "${QEMU_GUEST_TIMEOUT:-20}" "$qemu" -accel tcg,thread=single -M pc -nodefaults -display none \
  -serial stdio -monitor none -no-reboot \
  -device isa-debug-exit,iobase=0xf4,iosize=4 -device pc-testdev \
  -kernel "$elf" -append "$cmdline" "$@" </dev/null 2>&1)
status=$?
out=${out//$'\r'/}
printf '%s\n' "$out"
echo "-- qemu exit status $status (want $want_status)"

ok=1
if [[ $status != "$want_status" ]]; then
  echo "FAIL: exit status $status, expected $want_status"
  ok=0
fi
rest=$patterns
while [[ -n $rest ]]; do
  pat=${rest%%@@*}
  if [[ $rest == *"@@"* ]]; then rest=${rest#*@@}; else rest=; fi
  [[ -z $pat ]] && continue
  if ! grep -Eq -- "$pat" <<<"$out"; then
    echo "FAIL: no output line matches /$pat/"
    ok=0
  fi
done
((ok)) && exit 0 || exit 1
