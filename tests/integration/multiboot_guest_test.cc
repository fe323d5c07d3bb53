// Runs issue 11's multiboot test guests (guest/tests/) under minivmm, where a case needs more
// than the exit status and the console: the rest are tests/testrun/boot.toml. The same guests
// and cases pass and fail the same way under QEMU TCG (label qemu, tests/qemu/). Skips only
// when /dev/kvm cannot be opened.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

// isa-debug-exit statuses: (value << 1) | 1.
constexpr int kGuestPass = 1;
constexpr int kGuestFail = 3;

std::string guest_path(const std::string& name) {
  return std::string(MINIVMM_TEST_GUEST_DIR) + "/minivmm-test-" + name + ".elf";
}

#define EXPECT_STATUS(r, want)                                                        \
  do {                                                                                \
    ASSERT_EQ((r).term_signal, 0) << (r).err;                                         \
    EXPECT_EQ((r).exit_code, (want)) << "stderr:\n" << (r).err << "\nconsole:\n" << (r).out; \
  } while (0)

// The cases judged by exit status and console lines alone (fw_cfg's values, SMP start-up, the
// IOAPIC's lines, real mode; each passing with the values given and failing with others) are
// tests/testrun/boot.toml, run by `minivmm test` (ctest testrun.boot). This one reads the run
// report too.
// The test devices are opt-in (issue 21): a default boot has no fw_cfg and no pc-testdev. The
// fw_cfg guest then finds no signature at 0x510 (an empty ISA port reads 0xff) and fails, the
// report has neither device, and the guest's reads of 0x510 show up as unmapped.
TEST(BootMultibootGuestTest, WithoutTestdevThereIsNoFwCfgAndNoPcTestdev) {
  SKIP_WITHOUT_KVM();
  const RunResult r = run_minivmm({"run", "--kernel", guest_path("fwcfg"), "--cmdline",
                                   "cpus=1 mem=64M"},
                                  /*with_stats=*/true, /*timeout_s=*/60);
  EXPECT_STATUS(r, kGuestFail);
  EXPECT_FALSE(has(r.out, "fwcfg: signature QEMU")) << r.out;
  ASSERT_TRUE(r.stats.has_value()) << r.err;
  const auto& devices = (*r.stats)["devices"];
  EXPECT_FALSE(devices.contains("fw_cfg"));
  EXPECT_FALSE(devices.contains("pc_testdev"));
  EXPECT_TRUE(devices["unmapped_ports"].contains("0x0510")) << devices["unmapped_ports"].dump();

  const RunResult with = run_minivmm({"run", "--kernel", guest_path("fwcfg"), "--cmdline",
                                      "cpus=1 mem=64M", "--testdev"},
                                     /*with_stats=*/true, /*timeout_s=*/60);
  EXPECT_STATUS(with, kGuestPass);
  ASSERT_TRUE(with.stats.has_value()) << with.err;
  EXPECT_TRUE((*with.stats)["devices"].contains("fw_cfg"));
  EXPECT_TRUE((*with.stats)["devices"].contains("pc_testdev"));
}

}  // namespace
}  // namespace minivmm::testing
