// kvm-unit-tests' x86/run speaks QEMU: `-smp 2 -append 'cpuid' -cpu qemu64,+x2apic -m 2048`.
// This maps such a command line to `minivmm run` options the way scripts/kvm_unit_tests.sh (the
// QEMU stand-in run_tests.sh uses) maps it, so a test gets the same guest under `minivmm test`
// as under run_tests.sh: the same vCPUs, memory, CPUID model and hidden features, command line
// and lost-tick policy, and the same warnings for what minivmm does not have (a `+feature`, a
// `-machine` property, a PCI device). Those warnings take part in the verdict as they do in
// the suite (verdict.h); an option the stand-in refuses makes the test SKIP with its message,
// as the suite's probe run does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::testrun {

struct MinivmmGuest {
  std::string kernel;
  std::string cmdline;
  std::string initrd;
  unsigned cpus = 1;
  unsigned memory_mib = 128;  // QEMU's default for a PC
  std::string cpu = "baseline";
  std::vector<std::string> cpuid_mask;
  std::string lost_ticks;  // empty: minivmm's default

  // The `minivmm run` arguments (without "run"), with what every suite test gets: the test
  // devices, no console input, errors only on stderr.
  std::vector<std::string> run_args() const;
};

struct QemuMapping {
  MinivmmGuest guest;
  std::vector<std::string> warnings;  // one line each, each containing "warning"
};

// Maps `args` (QEMU options, as x86/run would pass them). On an option minivmm cannot take,
// returns nullopt with `error` set to the one line the suite would show as the SKIP reason.
std::optional<QemuMapping> map_qemu_args(const std::vector<std::string>& args, std::string& error);

// QEMU's -m value in MiB (a plain number is MiB; K, M, G, T with an optional B), or nullopt.
std::optional<unsigned long long> qemu_memory_mib(std::string_view value);

// The name --cpuid-mask knows for a QEMU `-cpu` feature, or nullopt.
std::optional<std::string> cpuid_mask_name(std::string_view qemu_feature);

}  // namespace minivmm::testrun
