#!/usr/bin/env bash
# Runs one kvm-unit-tests x86 test under minivmm through the suite's own run_tests.sh, with
# scripts/kvm_unit_tests.sh standing in for QEMU, and turns its verdict into ctest's: PASS -> 0,
# SKIP -> 77 (ctest's SKIP_RETURN_CODE), FAIL or anything else -> 1. Registered by
# tests/CMakeLists.txt (label kvm-unit-tests) only where the suite has been built; see
# docs/kvm-unit-tests.md. It runs the suite's code, it does not build it.
#
# usage: run_kvm_unit_test.sh SUITE_DIR MINIVMM_BINARY TEST_NAME
set -u
suite=$1 minivmm=$2 name=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
  echo "SKIP: /dev/kvm is not usable here; the suite needs KVM"
  exit 77
fi
cd "$suite" || exit 1
out=$(QEMU="$here/../../scripts/kvm_unit_tests.sh" MINIVMM_BIN="$minivmm" ACCEL=kvm \
  ./run_tests.sh -v "$name" 2>&1)
echo "$out"
case "$out" in
  *PASS*) exit 0 ;;
  *SKIP*) exit 77 ;;
  *) exit 1 ;;
esac
