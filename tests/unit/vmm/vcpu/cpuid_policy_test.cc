#include "vmm/vcpu/cpuid_policy.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace minivmm::vmm {
namespace {

kvm_cpuid_entry2 entry(std::uint32_t function, std::uint32_t ecx, std::uint32_t ebx = 0) {
  kvm_cpuid_entry2 e{};
  e.function = function;
  e.ecx = ecx;
  e.ebx = ebx;
  e.edx = 0xffffffffu;
  return e;
}

const kvm_cpuid_entry2* find(const std::vector<kvm_cpuid_entry2>& v, std::uint32_t function) {
  for (const auto& e : v) {
    if (e.function == function) return &e;
  }
  return nullptr;
}

std::vector<kvm_cpuid_entry2> host_like() {
  // Everything set, as a generous host would report it.
  return {entry(1, 0x7fffffffu), entry(7, 0xffffffffu, 0xffffffffu), entry(0xd, 7),
          entry(0x80000001, 0xffffffffu), entry(0x40000000, 0)};
}

TEST(CpuidPolicyTest, BaselineHidesCx16XsaveAndExtendedFeatures) {
  const auto out = apply_cpuid_policy(host_like(), CpuModel::kBaseline, {});
  const auto* leaf1 = find(out, 1);
  ASSERT_NE(leaf1, nullptr);
  EXPECT_EQ(leaf1->ecx & (1u << 13), 0u) << "cx16";
  EXPECT_EQ(leaf1->ecx & (1u << 26), 0u) << "xsave";
  EXPECT_EQ(leaf1->ecx & (1u << 28), 0u) << "avx";
  EXPECT_NE(leaf1->ecx & (1u << 20), 0u) << "sse4_2 kept";
  EXPECT_NE(leaf1->ecx & (1u << 31), 0u) << "hypervisor bit";
  EXPECT_EQ(leaf1->edx, 0xffffffffu) << "leaf 1 EDX passes through";
  EXPECT_EQ(find(out, 7)->ebx, 0u);
  EXPECT_EQ(find(out, 0xd), nullptr) << "no XSAVE leaf without XSAVE";
  EXPECT_EQ(find(out, 0x80000001)->ecx, 1u) << "LAHF only";
  EXPECT_NE(find(out, 0x40000000), nullptr) << "KVM leaves kept";
}

TEST(CpuidPolicyTest, HostPassesThroughAndSetsHypervisorBit) {
  const auto out = apply_cpuid_policy(host_like(), CpuModel::kHost, {});
  EXPECT_EQ(find(out, 1)->ecx, 0xffffffffu);
  EXPECT_EQ(find(out, 7)->ebx, 0xffffffffu);
  EXPECT_NE(find(out, 0xd), nullptr);
}

TEST(CpuidPolicyTest, MaskClearsNamedFeatures) {
  const auto out = apply_cpuid_policy(host_like(), CpuModel::kHost, {"cx16", "avx2", "nx"});
  EXPECT_EQ(find(out, 1)->ecx & (1u << 13), 0u);
  EXPECT_EQ(find(out, 7)->ebx & (1u << 5), 0u);
  EXPECT_EQ(find(out, 0x80000001)->edx & (1u << 20), 0u);
  EXPECT_NE(find(out, 1)->ecx & (1u << 12), 0u) << "fma untouched";
}

TEST(CpuidPolicyTest, UnknownFeatureNameIsAnError) {
  try {
    apply_cpuid_policy(host_like(), CpuModel::kBaseline, {"warp-drive"});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("warp-drive"), std::string::npos);
  }
}

TEST(CpuidPolicyTest, ParsesModelNames) {
  EXPECT_EQ(parse_cpu_model("host"), CpuModel::kHost);
  EXPECT_EQ(parse_cpu_model("baseline"), CpuModel::kBaseline);
  EXPECT_FALSE(parse_cpu_model("max").has_value());
}

}  // namespace
}  // namespace minivmm::vmm

namespace minivmm::vmm {
namespace {

kvm_cpuid_entry2 sub(std::uint32_t function, std::uint32_t index, std::uint32_t eax,
                     std::uint32_t ebx, std::uint32_t ecx, std::uint32_t edx) {
  kvm_cpuid_entry2 e{};
  e.function = function;
  e.index = index;
  e.eax = eax;
  e.ebx = ebx;
  e.ecx = ecx;
  e.edx = edx;
  return e;
}

const kvm_cpuid_entry2* find_sub(const std::vector<kvm_cpuid_entry2>& v, std::uint32_t function,
                                 std::uint32_t index) {
  for (const auto& e : v) {
    if (e.function == function && e.index == index) return &e;
  }
  return nullptr;
}

// A host with 8 threads on 4 cores (so every field starts different from what a guest needs).
std::vector<kvm_cpuid_entry2> topology_host() {
  return {sub(1, 0, 0x906ea, 0x08100800, 0, 0x178bfbff),
          sub(4, 0, 0x1c004121, 0, 0, 0),
          sub(4, 4, 0, 0, 0, 0),  // the terminating cache leaf: type 0
          sub(0xb, 0, 1, 2, 0x100, 7),
          sub(0xb, 1, 4, 8, 0x201, 7),
          sub(0xb, 2, 0, 0, 2, 7),
          sub(0x80000008, 0, 0x3027, 0, 0x7007, 0)};
}

TEST(CpuidForVcpuTest, Leaf1CarriesTheInitialApicIdAndCount) {
  const auto out = cpuid_for_vcpu(topology_host(), 2, 3);
  const auto* l1 = find_sub(out, 1, 0);
  EXPECT_EQ(l1->ebx >> 24, 2u);
  EXPECT_EQ((l1->ebx >> 16) & 0xff, 3u);
  EXPECT_EQ(l1->ebx & 0xffff, 0x0800u) << "CLFLUSH size and brand index kept";
  EXPECT_NE(l1->edx & (1u << 28), 0u) << "HTT: more than one logical CPU";
}

TEST(CpuidForVcpuTest, OneCpuHasNoHtt) {
  const auto out = cpuid_for_vcpu(topology_host(), 0, 1);
  const auto* l1 = find_sub(out, 1, 0);
  EXPECT_EQ(l1->ebx >> 16, 1u);
  EXPECT_EQ(l1->edx & (1u << 28), 0u);
}

TEST(CpuidForVcpuTest, Leaf0xBGivesX2ApicIdAndCoreLevel) {
  const auto out = cpuid_for_vcpu(topology_host(), 5, 6);
  for (std::uint32_t i = 0; i < 3; ++i) EXPECT_EQ(find_sub(out, 0xb, i)->edx, 5u) << i;
  const auto* smt = find_sub(out, 0xb, 0);
  EXPECT_EQ(smt->eax, 0u);
  EXPECT_EQ(smt->ebx, 1u);
  EXPECT_EQ(smt->ecx, 0x100u);
  const auto* core = find_sub(out, 0xb, 1);
  EXPECT_EQ(core->eax, 3u) << "6 CPUs need 3 id bits";
  EXPECT_EQ(core->ebx, 6u);
  EXPECT_EQ(core->ecx, 0x201u);
  EXPECT_EQ(find_sub(out, 0xb, 2)->ecx, 2u) << "level 2 invalid";
}

TEST(CpuidForVcpuTest, CacheAndAmdCoreCountsFollowTheCount) {
  const auto out = cpuid_for_vcpu(topology_host(), 0, 4);
  EXPECT_EQ(find_sub(out, 4, 0)->eax >> 26, 3u);
  EXPECT_EQ(find_sub(out, 4, 0)->eax & 0x03ffffffu, 0x1c004121u & 0x03ffffffu);
  EXPECT_EQ(find_sub(out, 4, 4)->eax, 0u) << "terminator untouched";
  EXPECT_EQ(find_sub(out, 0x80000008, 0)->ecx, 0x7003u);
}

TEST(CpuidForVcpuTest, EveryVcpuGetsItsOwnId) {
  for (std::uint32_t i = 0; i < kMaxVcpus; ++i) {
    const auto out = cpuid_for_vcpu(topology_host(), i, kMaxVcpus);
    EXPECT_EQ(find_sub(out, 1, 0)->ebx >> 24, i);
    EXPECT_EQ(find_sub(out, 0xb, 1)->eax, 4u);
  }
}

TEST(CpuidForVcpuTest, BadCountsAreRejected) {
  EXPECT_THROW(cpuid_for_vcpu(topology_host(), 0, 0), std::invalid_argument);
  EXPECT_THROW(cpuid_for_vcpu(topology_host(), 0, kMaxVcpus + 1), std::invalid_argument);
  EXPECT_THROW(cpuid_for_vcpu(topology_host(), 3, 3), std::invalid_argument);
}

}  // namespace
}  // namespace minivmm::vmm
