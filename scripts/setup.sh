#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test minivmm.
# Does nothing (no apt-get at all) when everything is already present.
set -euo pipefail

# Debian package -> a file that proves it is installed.
declare -A need=(
  [libspdlog-dev]=/usr/include/spdlog/spdlog.h
  [libcli11-dev]=/usr/include/CLI/CLI.hpp
  [libgtest-dev]=/usr/include/gtest/gtest.h
  [libbenchmark-dev]=/usr/include/benchmark/benchmark.h
  [linux-libc-dev]=/usr/include/linux/kvm.h
  [nlohmann-json3-dev]=/usr/include/nlohmann/json.hpp
  [libseccomp-dev]=/usr/include/seccomp.h
  [liburing-dev]=/usr/include/liburing.h
  [libslirp-dev]=/usr/include/slirp/libslirp.h
  # The virtio-net end-to-end tests (tests/integration/net_test.cc) and scripts/bench_net.py:
  # TAP devices in a network namespace, the host's ping and socat against the guest.
  [iproute2]=/sbin/ip
  [iputils-ping]=/bin/ping
  [socat]=/usr/bin/socat
  [pkg-config]=/usr/bin/pkg-config
  [cmake]=/usr/bin/cmake
  [ninja-build]=/usr/bin/ninja
  [g++]=/usr/bin/g++
  [binutils]=/usr/bin/objcopy
  [strace]=/usr/bin/strace
  [gnuplot-nox]=/usr/bin/gnuplot
  [clang]=/usr/bin/clang
  [libclang-rt-14-dev]=/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a
  # `minivmm test`: manifests are TOML (vmm/testrun/), and its JUnit test reads the report with
  # a real consumer.
  [libtomlplusplus-dev]=/usr/include/toml++/toml.h
  [python3-junitparser]=/usr/lib/python3/dist-packages/junitparser/__init__.py
  # ...and its TAP report with tappy besides tests/testrun/check_tap.py's strict reading.
  [python3-tap]=/usr/lib/python3/dist-packages/tap/__init__.py
  # tappy reads TAP 13's YAML blocks only with these two (else it warns and skips them).
  [python3-yaml]=/usr/lib/python3/dist-packages/yaml/__init__.py
  [python3-more-itertools]=/usr/lib/python3/dist-packages/more_itertools/__init__.py
  # scripts/bench_test_runner.sh: each run's wall and CPU time.
  [time]=/usr/bin/time
  # The gdb stub's tests (tests/integration/gdb_test.cc): Debian's gdb in batch mode.
  [gdb]=/usr/bin/gdb
)

missing=()
for pkg in "${!need[@]}"; do
  [[ -e "${need[$pkg]}" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
