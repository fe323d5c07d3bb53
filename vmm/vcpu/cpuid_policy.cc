#include "vmm/vcpu/cpuid_policy.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace minivmm::vmm {
namespace {

std::uint32_t& reg_of(kvm_cpuid_entry2& e, CpuidFeature::Reg r) {
  switch (r) {
    case CpuidFeature::kEax: return e.eax;
    case CpuidFeature::kEbx: return e.ebx;
    case CpuidFeature::kEcx: return e.ecx;
    case CpuidFeature::kEdx: return e.edx;
  }
  return e.eax;
}

constexpr std::uint32_t bit(unsigned n) { return 1u << n; }

// Leaf 1 ECX bits kept by the baseline: SSE3, SSSE3, SSE4.1, SSE4.2, x2APIC, POPCNT,
// TSC-deadline, hypervisor. CX16 (13) is left out: this host's emulator fails on
// `lock cmpxchg16b`. XSAVE/OSXSAVE/AVX are left out: xsave/xrstor fail here too.
constexpr std::uint32_t kBaselineLeaf1Ecx =
    bit(0) | bit(9) | bit(19) | bit(20) | bit(21) | bit(23) | bit(24) | bit(31);
// Leaf 0x80000001 ECX: LAHF/SAHF in long mode only.
constexpr std::uint32_t kBaselineExtEcx = bit(0);

}  // namespace

std::optional<CpuModel> parse_cpu_model(std::string_view name) noexcept {
  if (name == "host") return CpuModel::kHost;
  if (name == "baseline") return CpuModel::kBaseline;
  return std::nullopt;
}

const std::vector<CpuidFeature>& known_cpuid_features() {
  static const std::vector<CpuidFeature> features = {
      {"sse3", 1, 0, CpuidFeature::kEcx, 0},     {"pclmulqdq", 1, 0, CpuidFeature::kEcx, 1},
      {"ssse3", 1, 0, CpuidFeature::kEcx, 9},    {"fma", 1, 0, CpuidFeature::kEcx, 12},
      {"cx16", 1, 0, CpuidFeature::kEcx, 13},    {"sse4_1", 1, 0, CpuidFeature::kEcx, 19},
      {"sse4_2", 1, 0, CpuidFeature::kEcx, 20},  {"x2apic", 1, 0, CpuidFeature::kEcx, 21},
      {"movbe", 1, 0, CpuidFeature::kEcx, 22},   {"popcnt", 1, 0, CpuidFeature::kEcx, 23},
      {"tsc_deadline_timer", 1, 0, CpuidFeature::kEcx, 24},
      {"aes", 1, 0, CpuidFeature::kEcx, 25},     {"xsave", 1, 0, CpuidFeature::kEcx, 26},
      {"avx", 1, 0, CpuidFeature::kEcx, 28},     {"f16c", 1, 0, CpuidFeature::kEcx, 29},
      {"rdrand", 1, 0, CpuidFeature::kEcx, 30},  {"pge", 1, 0, CpuidFeature::kEdx, 13},
      {"mtrr", 1, 0, CpuidFeature::kEdx, 12},    {"pat", 1, 0, CpuidFeature::kEdx, 16},
      {"fsgsbase", 7, 0, CpuidFeature::kEbx, 0}, {"bmi1", 7, 0, CpuidFeature::kEbx, 3},
      {"avx2", 7, 0, CpuidFeature::kEbx, 5},     {"smep", 7, 0, CpuidFeature::kEbx, 7},
      {"bmi2", 7, 0, CpuidFeature::kEbx, 8},     {"erms", 7, 0, CpuidFeature::kEbx, 9},
      {"invpcid", 7, 0, CpuidFeature::kEbx, 10}, {"avx512f", 7, 0, CpuidFeature::kEbx, 16},
      {"rdseed", 7, 0, CpuidFeature::kEbx, 18},  {"smap", 7, 0, CpuidFeature::kEbx, 20},
      {"umip", 7, 0, CpuidFeature::kEcx, 2},     {"pku", 7, 0, CpuidFeature::kEcx, 3},
      {"la57", 7, 0, CpuidFeature::kEcx, 16},    {"rdpid", 7, 0, CpuidFeature::kEcx, 22},
      {"nx", 0x80000001, 0, CpuidFeature::kEdx, 20},
      {"pdpe1gb", 0x80000001, 0, CpuidFeature::kEdx, 26},
      {"rdtscp", 0x80000001, 0, CpuidFeature::kEdx, 27},
  };
  return features;
}

std::vector<kvm_cpuid_entry2> apply_cpuid_policy(std::vector<kvm_cpuid_entry2> entries,
                                                 CpuModel model,
                                                 const std::vector<std::string>& masked) {
  auto find = [&](std::uint32_t function, std::uint32_t index) -> kvm_cpuid_entry2* {
    for (auto& e : entries) {
      if (e.function == function && e.index == index) return &e;
    }
    return nullptr;
  };

  if (model == CpuModel::kBaseline) {
    if (auto* e = find(1, 0)) e->ecx &= kBaselineLeaf1Ecx;
    if (auto* e = find(7, 0)) {
      // Structured extended features (AVX2, AVX-512, ...): none in the baseline, except the
      // harmless ERMS/FSGSBASE-free set — keep it empty and say so.
      e->ebx = 0;
      e->ecx = 0;
      e->edx = 0;
    }
    if (auto* e = find(0x80000001, 0)) e->ecx &= kBaselineExtEcx;
    // Without XSAVE the guest must not see its state-component leaf.
    std::erase_if(entries, [](const kvm_cpuid_entry2& e) { return e.function == 0xd; });
  }

  for (const std::string& name : masked) {
    const auto& known = known_cpuid_features();
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const CpuidFeature& f) { return f.name == name; });
    if (it == known.end()) throw std::invalid_argument("unknown CPUID feature '" + name + "'");
    if (auto* e = find(it->function, it->index)) reg_of(*e, it->reg) &= ~(1u << it->bit);
  }

  if (auto* e = find(1, 0)) e->ecx |= 1u << 31;  // hypervisor present
  return entries;
}

std::vector<kvm_cpuid_entry2> cpuid_for_vcpu(std::vector<kvm_cpuid_entry2> entries,
                                             std::uint32_t index, std::uint32_t count) {
  if (count == 0 || count > kMaxVcpus || index >= count) {
    throw std::invalid_argument("vCPU " + std::to_string(index) + " of " + std::to_string(count) +
                                ": the count must be 1.." + std::to_string(kMaxVcpus));
  }
  // Bits of APIC id the cores of one package take (SDM vol. 3A 10.12.2 / 8.9.1).
  std::uint32_t core_bits = 0;
  while ((1u << core_bits) < count) ++core_bits;
  for (kvm_cpuid_entry2& e : entries) {
    switch (e.function) {
      case 1:
        e.ebx = (e.ebx & 0x0000ffffu) | (index << 24) | (count << 16);
        e.edx = count > 1 ? e.edx | (1u << 28) : e.edx & ~(1u << 28);
        break;
      case 4:
        if ((e.eax & 0x1fu) != 0) e.eax = (e.eax & 0x03ffffffu) | (((1u << core_bits) - 1) << 26);
        break;
      case 0xb:
      case 0x1f:
        e.edx = index;
        if (e.index == 0) {
          e.eax = 0;
          e.ebx = 1;
          e.ecx = (1u << 8) | 0;  // type 1: SMT
        } else if (e.index == 1) {
          e.eax = core_bits;
          e.ebx = count;
          e.ecx = (2u << 8) | 1;  // type 2: core
        } else {
          e.eax = 0;
          e.ebx = 0;
          e.ecx = e.index & 0xffu;  // type 0: no such level
        }
        break;
      case 0x80000008:
        e.ecx = (e.ecx & ~0xffu) | (count - 1);
        break;
      default:
        break;
    }
  }
  return entries;
}

}  // namespace minivmm::vmm
