// What the guest's CPUID says, starting from KVM_GET_SUPPORTED_CPUID (what KVM can virtualise
// on this host). `host` passes that through; `baseline` (the default) is a conservative x86-64
// set that leaves out what this host's instruction emulator cannot run (CX16, XSAVE) and the
// vector extensions a tiny guest never needs. See docs/cpuid.md.
#pragma once

#include <linux/kvm.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::vmm {

enum class CpuModel { kHost, kBaseline };

std::optional<CpuModel> parse_cpu_model(std::string_view name) noexcept;

struct CpuidFeature {
  std::string_view name;
  std::uint32_t function;
  std::uint32_t index;
  enum Reg { kEax, kEbx, kEcx, kEdx } reg;
  std::uint32_t bit;
};

// The features --cpuid-mask can name (lower case, as /proc/cpuinfo spells them).
const std::vector<CpuidFeature>& known_cpuid_features();

// Applies the model and clears every feature in `masked` (names from known_cpuid_features();
// throws std::invalid_argument naming an unknown one). Always sets the hypervisor bit.
std::vector<kvm_cpuid_entry2> apply_cpuid_policy(std::vector<kvm_cpuid_entry2> supported,
                                                 CpuModel model,
                                                 const std::vector<std::string>& masked);

}  // namespace minivmm::vmm
