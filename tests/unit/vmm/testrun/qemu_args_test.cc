// QEMU options from kvm-unit-tests' x86/run mapped to `minivmm run`, as
// scripts/kvm_unit_tests.sh maps them (tests/scripts/kvm_unit_tests_sh_test.sh checks the
// script; these check the runner's re-implementation against the same cases).
#include "vmm/testrun/qemu_args.h"

#include <gtest/gtest.h>

namespace {

using minivmm::testrun::map_qemu_args;
using Args = std::vector<std::string>;

// x86/run's own options, as every test gets them.
Args with_x86_run(const Args& cfg) {
  Args a{"--no-reboot", "-nodefaults", "-global", "kvm-pit.lost_tick_policy=discard", "-device",
         "pc-testdev", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x4", "-display", "none",
         "-serial", "stdio", "-machine", "accel=kvm", "-kernel", "/k/x86/apic.flat"};
  a.insert(a.end(), cfg.begin(), cfg.end());
  return a;
}

TEST(QemuArgsTest, X86RunsOwnOptionsAloneGiveTheDefaults) {
  std::string error;
  const auto m = map_qemu_args(with_x86_run({"-smp", "1"}), error);
  ASSERT_TRUE(m) << error;
  EXPECT_TRUE(m->warnings.empty());
  EXPECT_EQ(m->guest.run_args(),
            (Args{"--kernel", "/k/x86/apic.flat", "--cpus", "1", "--memory", "128M", "--cpu",
                  "baseline", "--no-console-input", "--quiet", "--log-level", "error", "--testdev",
                  "--lost-ticks", "discard"}));
}

TEST(QemuArgsTest, X2apicEntry) {
  std::string error;
  const auto m = map_qemu_args(
      with_x86_run({"-smp", "2", "-cpu", "qemu64,+x2apic,+tsc-deadline", "-initrd", "/e"}), error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->guest.cpus, 2u);
  EXPECT_EQ(m->guest.cpu, "baseline");
  EXPECT_EQ(m->guest.initrd, "/e");
  ASSERT_EQ(m->warnings.size(), 2u);
  EXPECT_EQ(m->warnings[0],
            "minivmm test: warning: -cpu: minivmm adds no features beyond --cpu baseline; '+x2apic' ignored");
}

TEST(QemuArgsTest, HiddenFeaturesBecomeTheCpuidMask) {
  std::string error;
  const auto m = map_qemu_args(with_x86_run({"-cpu", "qemu64,-pcid,-invpcid,-tsc-deadline,-sse4.2"}), error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->guest.cpuid_mask, (Args{"invpcid", "tsc_deadline_timer", "sse4_2"}));
  ASSERT_EQ(m->warnings.size(), 1u);
  EXPECT_EQ(m->warnings[0], "minivmm test: warning: -cpu: cannot hide 'pcid'; ignored");
  const Args a = m->guest.run_args();
  EXPECT_EQ(a.back(), "invpcid,tsc_deadline_timer,sse4_2");
}

TEST(QemuArgsTest, HostAndMaxModelsAreTheHostsCpu) {
  std::string error;
  for (const char* model : {"host,migratable=no", "max", "max,+vmx,-pku"}) {
    const auto m = map_qemu_args(with_x86_run({"-cpu", model}), error);
    ASSERT_TRUE(m) << error;
    EXPECT_EQ(m->guest.cpu, "host") << model;
  }
  const auto m = map_qemu_args(with_x86_run({"-cpu", "Opteron_G1,vendor=AuthenticAMD"}), error);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->guest.cpu, "baseline");
  EXPECT_EQ(m->warnings, Args{"minivmm test: warning: -cpu: property 'vendor=AuthenticAMD' ignored"});
}

TEST(QemuArgsTest, MemoryInQemusUnitsCappedAt3G) {
  using minivmm::testrun::qemu_memory_mib;
  EXPECT_EQ(qemu_memory_mib("2048"), 2048u);
  EXPECT_EQ(qemu_memory_mib("4g"), 4096u);
  EXPECT_EQ(qemu_memory_mib("4GB"), 4096u);
  EXPECT_EQ(qemu_memory_mib("size=512M"), 512u);
  EXPECT_EQ(qemu_memory_mib("1025k"), 2u);
  EXPECT_EQ(qemu_memory_mib("1T"), 1048576u);
  EXPECT_EQ(qemu_memory_mib("2560,slots=2"), 2560u);
  EXPECT_FALSE(qemu_memory_mib("lots"));
  EXPECT_FALSE(qemu_memory_mib("4x"));
  EXPECT_FALSE(qemu_memory_mib(""));
  std::string error;
  const auto m = map_qemu_args(with_x86_run({"-m", "4g"}), error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->guest.memory_mib, 3072u);
  EXPECT_EQ(m->warnings, Args{"minivmm test: warning: -m 4096M is more than minivmm's 3072M; using 3072M"});
}

TEST(QemuArgsTest, WhatMinivmmLacksIsAWarning) {
  std::string error;
  const auto m = map_qemu_args(
      with_x86_run({"-M", "q35,kernel-irqchip=split", "-device", "intel-iommu,intremap=on,eim=off",
                    "-device", "edu", "-overcommit", "cpu-pm=on", "-enable-kvm", "-machine",
                    "pit=off", "-global", "foo.bar=1"}),
      error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->warnings,
            (Args{"minivmm test: warning: -machine: 'kernel-irqchip=split' ignored",
                  "minivmm test: warning: -device intel-iommu,intremap=on,eim=off: not provided by minivmm; ignored",
                  "minivmm test: warning: -device edu: not provided by minivmm; ignored",
                  "minivmm test: warning: -overcommit cpu-pm=on ignored",
                  "minivmm test: warning: -machine: 'pit=off' ignored",
                  "minivmm test: warning: -global foo.bar=1 ignored"}));
}

TEST(QemuArgsTest, AppendIsTheCommandLineAndTheLastWins) {
  std::string error;
  const auto m = map_qemu_args(with_x86_run({"-append", "a b", "--append", "cpuid"}), error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->guest.cmdline, "cpuid");
}

struct Refusal {
  Args cfg;
  const char* error;
};

class QemuArgsRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(QemuArgsRefusalTest, RefusedWithTheStandInsMessage) {
  std::string error;
  EXPECT_FALSE(map_qemu_args(with_x86_run(GetParam().cfg), error));
  EXPECT_EQ(error, GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Options, QemuArgsRefusalTest,
    ::testing::Values(
        Refusal{{"-smp", "17"}, "Invalid SMP CPUs 17. The max CPUs supported by machine 'minivmm' is 16"},
        Refusal{{"-smp", "0"}, "Invalid SMP CPUs 0. The max CPUs supported by machine 'minivmm' is 16"},
        Refusal{{"-smp", "cpus=x"}, "Invalid SMP CPUs 'x'"},
        Refusal{{"-m", "much"}, "invalid -m value 'much'"},
        Refusal{{"-machine", "accel=tcg"}, "minivmm runs guests under KVM only (-machine accel=tcg)"},
        Refusal{{"-accel", "tcg"}, "minivmm runs guests under KVM only (-accel tcg)"},
        Refusal{{"-snapshot"}, "unsupported option '-snapshot'"},
        Refusal{{"-cpu"}, "option -cpu needs an argument"}));

TEST(QemuArgsTest, AKernelIsRequired) {
  std::string error;
  EXPECT_FALSE(map_qemu_args({"-smp", "1"}, error));
  EXPECT_EQ(error, "no -kernel given");
}

}  // namespace
