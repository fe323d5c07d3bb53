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
  (cd "$dir" && ctest -j "$jobs" --output-on-failure -LE 'linux|fuzz|kvm-unit-tests')
}

# -O2 without debug info (GCC 12 at -O3 warns falsely inside std::vector) and a sanitizer build at -O1 with line tables only: the two builds
# dominate the suite's time on a 2-core machine, and full -g roughly doubles compile time.
run_suite build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"
run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_BUILD_BENCH=OFF

# The device fuzzers (libFuzzer, clang, ASan+UBSan): every seed, then a short fixed run of each
# target. docs/fuzzing.md says how to run them for longer.
if command -v clang++ >/dev/null; then
  echo "== configure and build (build-fuzz): libFuzzer targets"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_FUZZ=ON -DMINIVMM_FUZZ_SECONDS=10 \
    -DMINIVMM_BUILD_GUEST=OFF -DMINIVMM_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz -j "$jobs" --target fuzzers
  echo "== test (build-fuzz)"
  (cd build-fuzz && ctest -j "$jobs" --output-on-failure -L fuzz)
else
  echo "== fuzzers skipped: clang++ not found (scripts/setup.sh installs it)"
fi
