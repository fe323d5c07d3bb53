#!/usr/bin/env bash
# ctest (label linux): boots a Debian kernel with minivmm through scripts/boot_debian_kernel.sh
# and checks that the kernel log reached the milestones this host allows and that minivmm
# stopped the documented way: exit 10 with the emulation-failure report, or exit 0 after the
# initramfs printed its marker and reset the machine.
#
#   boot_debian_kernel_test.sh MINIVMM FORMAT PACKAGE LOG
set -uo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 MINIVMM bzimage|vmlinux PACKAGE LOG" >&2
  exit 2
fi
minivmm=$1 format=$2 package=$3 log=$4
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
  echo "SKIP: /dev/kvm is not usable" >&2
  exit 77  # SKIP_RETURN_CODE in CMakeLists.txt
fi

bash "$repo/scripts/boot_debian_kernel.sh" --minivmm "$minivmm" --format "$format" \
  --timeout "${MINIVMM_LINUX_TIMEOUT:-3000}" --log "$log" "$package"
status=$?

failures=0
expect() {  # expect NAME ERE: the log must contain a line matching ERE
  if grep -q -E "$2" "$log"; then
    echo "ok:   $1"
  else
    echo "FAIL: $1 (no line matching /$2/ in $log)"
    failures=$((failures + 1))
  fi
}

expect "Linux version banner" '\] Linux version [0-9]'
expect "e820 map" 'BIOS-e820: \[mem 0x0000000000100000-'
expect "command line" '\] Command line: .*console=ttyS0'
expect "memory layout" '\] Memory: [0-9]+K/[0-9]+K available'
expect "x87 FPU will use FXSAVE" 'x86/fpu: x87 FPU will use FXSAVE'

case $status in
  10)
    echo "ok:   minivmm exited 10 (guest unsupported)"
    expect "emulation-failure report" 'KVM internal error, suberror 1 \(emulation failure'
    expect "registers in the report" 'vcpu0: rip=0x[0-9a-f]+'
    expect "instruction bytes in the report" 'vcpu0: instruction bytes at 0x[0-9a-f]+:( [0-9a-f]{2})+'
    ;;
  0)
    echo "ok:   minivmm exited 0 (guest reset)"
    expect "initramfs marker" '^\[ *[0-9.]+\] MINIVMM-INITRAMFS-OK'
    ;;
  *)
    echo "FAIL: minivmm exited $status, expected 10 (emulation failure) or 0 (reset)"
    failures=$((failures + 1))
    ;;
esac

if ((failures)); then
  echo "$failures check(s) failed; the log is $log"
  exit 1
fi
echo "all checks passed; the log is $log"
