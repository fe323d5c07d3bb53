#include "vmm/cpuid_policy.h"

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
