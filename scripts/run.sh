#!/usr/bin/env bash
# Sets up a fresh machine, builds minivmm and boots the bundled tiny guest idle at 250 Hz for
# 10 seconds (DURATION=N to change), then prints what it cost the host. Extra arguments go to
# `minivmm run`, e.g. scripts/run.sh --pit kvm --stats -
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target minivmm guest_kernel >/dev/null
exec build/vmm/minivmm run --kernel build/guest/minivmm-guest.bin \
  --cmdline "timer=pit hz=250 ticks=0" --duration "${DURATION:-10}" "$@"
