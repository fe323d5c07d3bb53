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

// The vCPUs' limit: kvm-unit-tests' SMP tests use at most 4; 16 keeps every per-vCPU array
// small and x2APIC-free (xAPIC ids 0..15).
inline constexpr std::uint32_t kMaxVcpus = 16;

// The CPUID of vCPU `index` of `count` (1..kMaxVcpus), from the policy's result: one package
// of `count` cores, one thread each, as QEMU 7.2 lays out `-smp N`. Sets what must differ per
// CPU or follow the count, where the leaf exists (KVM reports only what the host has):
//   leaf 1      EBX[31:24] initial APIC id = index (KVM's in-kernel LAPIC id is the vCPU id),
//               EBX[23:16] logical processors per package = count, EDX[28] HTT = count > 1
//   leaf 4      EAX[31:26] cores per package - 1 (rounded up to a power of two, as the id space)
//   leaf 0xB,   per sub-leaf: EDX x2APIC id = index; level 0 SMT (shift 0, 1 thread), level 1
//   leaf 0x1F   core (shift = bits for count, `count` CPUs), later levels invalid (type 0)
//   0x80000008  ECX[7:0] cores per package - 1 (AMD)
// Throws std::invalid_argument when index >= count or count is outside 1..kMaxVcpus.
std::vector<kvm_cpuid_entry2> cpuid_for_vcpu(std::vector<kvm_cpuid_entry2> entries,
                                             std::uint32_t index, std::uint32_t count);

}  // namespace minivmm::vmm
