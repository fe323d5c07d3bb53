// minivmm's own kvm-unit-tests-style guests (tests/kut_guests/) under KVM: fw_cfg, SMP start-up
// through INIT/SIPI, pc-testdev IRQ lines through the IOAPIC, real mode with the BIOS IVT. Each
// guest ends through isa-debug-exit with 0 (status 1) on success. Skip without /dev/kvm.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

constexpr int kGuestSuccess = 1;

std::string kut_guest(const std::string& name) {
  return std::string(MINIVMM_KUT_GUEST_DIR) + "/" + name + "_guest.elf";
}

RunResult run_guest(const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> args{"run", "--kernel", kut_guest(name), "--no-console-input"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_minivmm(args, true, 60);
}

#define SKIP_WITHOUT_KVM()                                                             \
  do {                                                                                 \
    if (auto why = kvm_unavailable_reason()) {                                         \
      GTEST_SKIP() << "KVM boot test skipped: " << *why << " (no usable /dev/kvm here)"; \
    }                                                                                  \
  } while (0)

TEST(BootKutGuestTest, FwCfgReportsCpusAndRam) {
  SKIP_WITHOUT_KVM();
  const RunResult r =
      run_guest("fwcfg", {"--cpus", "3", "--memory", "96M", "--cmdline", "cpus=3 mem=96"});
  EXPECT_EQ(r.exit_code, kGuestSuccess) << r.out << r.err;
  EXPECT_NE(r.out.find("fw_cfg: cpus 3 ram 96M"), std::string::npos) << r.out;
  ASSERT_TRUE(r.stats);
  EXPECT_GT((*r.stats)["devices"]["fw_cfg"]["selects"].get<int>(), 0);
  EXPECT_EQ((*r.stats)["devices"]["fw_cfg"]["unknown_selects"].get<int>(), 1) << "key 0x11";
}

TEST(BootKutGuestTest, EveryApStartsOnInitSipi) {
  SKIP_WITHOUT_KVM();
  for (const char* cpus : {"1", "2", "4", "16"}) {
    const RunResult r =
        run_guest("smp", {"--cpus", cpus, "--cmdline", std::string("cpus=") + cpus});
    EXPECT_EQ(r.exit_code, kGuestSuccess) << cpus << ": " << r.out << r.err;
    const std::string want = "smp: " + std::to_string(std::stoi(cpus) - 1) + " APs checked in";
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    ASSERT_TRUE(r.stats);
    EXPECT_EQ((*r.stats)["vcpus"].get<int>(), std::stoi(cpus));
  }
}

TEST(BootKutGuestTest, TestdevIrqLineArrivesThroughTheIoapic) {
  SKIP_WITHOUT_KVM();
  const RunResult r = run_guest("irq", {});
  EXPECT_EQ(r.exit_code, kGuestSuccess) << r.out << r.err;
  ASSERT_TRUE(r.stats);
  EXPECT_EQ((*r.stats)["devices"]["pc_testdev"]["irq_raises"].get<int>(), 3);
}

TEST(BootKutGuestTest, RealModeWithBiosIvtAndTestdevEcho) {
  SKIP_WITHOUT_KVM();
  const RunResult r = run_guest("realmode", {});
  EXPECT_EQ(r.exit_code, kGuestSuccess) << r.out << r.err;
  EXPECT_NE(r.out.find("real mode: IVT and pc-testdev echo ok"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace minivmm::testing
