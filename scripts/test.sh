#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite twice: a normal build, then one under
# AddressSanitizer + UndefinedBehaviorSanitizer. KVM boot tests (label kvm) run wherever
# /dev/kvm opens and skip with a message elsewhere. Build dirs: build/ and build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

run_suite() {
  local dir=$1
  shift
  echo "== configure and build ($dir): $*"
  cmake -S . -B "$dir" -G Ninja -DMINIVMM_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== test ($dir)"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure -LE 'linux|fuzz')
}

# Release without debug info and a sanitizer build at -O1 with line tables only: the two builds
# dominate the suite's time on a 2-core machine, and full -g roughly doubles compile time.
run_suite build -DCMAKE_BUILD_TYPE=Release
run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_BUILD_BENCH=OFF
