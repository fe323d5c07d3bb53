// Issue 25's quick load cell, the CI form of scripts/load_matrix.py: 16 guests at 250 Hz in the
// default tick mode (the host kernel's pulse train), beside two CPU hogs on this two-CPU host.
// Every guest must count its 1000 ticks over the time they take on time — the guest measures
// that itself with kvmclock (`stamps`) — with none lost and no stall of a second. Before the
// PIT owed the train's missed edges and held a stalled train, 7 of 16 guests here took 5.7-6.1 s
// for 4 s of ticks, with 1.1 s gaps and ticks_lost 0.
//
// The hogs are this test's children, each ended by its own alarm after 60 s if the test dies,
// and killed by pid at the end. ctest gives the test the host-CPU lock, so no other
// timing-bounded test runs beside it; ordinary tests do.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/integration/run_minivmm.h"

namespace minivmm::testing {
namespace {

constexpr int kCellGuests = 16;
constexpr int kCellHogs = 2;
constexpr int kCellHz = 250;
constexpr int kCellTicks = 1000;
// From the first tick to the last: kCellTicks - 1 periods on time. A guest may be this much behind
// at its last tick (the catch-up of a stall still under way); the collapse was 1.5x (5.9 s)
// and up to 5x. Loose on purpose: beside other work on this nested two-CPU host the whole host
// stalls now and then (one run showed the same 0.78 s gap in all 16 guests, to the
// millisecond). scripts/load_matrix.py measures the real figures; this catches a collapse.
constexpr double kCellMaxElapsedS = (kCellTicks - 1) / double(kCellHz) * 1.25;
constexpr double kCellMaxGapS = 2.5;

// A busy loop at nice 0, bounded by its own alarm.
pid_t start_hog() {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    for (;;) {
      __asm__ volatile("" ::: "memory");  // a loop the compiler must keep
    }
  }
  return pid;
}

TEST(BootLoadCellTest, SixteenGuestsBesideTwoCpuHogsCountEveryTickOnTime) {
  SKIP_WITHOUT_KVM();
  std::vector<pid_t> hogs;
  for (int i = 0; i < kCellHogs; ++i) hogs.push_back(start_hog());
  std::vector<Child> children;
  for (int i = 0; i < kCellGuests; ++i) {
    children.push_back(start_minivmm(
        {"run", "--kernel", guest_image(), "--cmdline",
         "timer=pit hz=" + std::to_string(kCellHz) + " ticks=" + std::to_string(kCellTicks) + " stamps",
         "--no-console-input", "--duration", "60"},
        /*with_stats=*/true, /*console_to_file=*/true));
  }
  std::vector<RunResult> results;
  for (auto& c : children) results.push_back(finish_minivmm(c, 90));
  for (const pid_t pid : hogs) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }

  double worst_elapsed = 0;
  double worst_gap = 0;
  for (int i = 0; i < kCellGuests; ++i) {
    const RunResult& r = results[static_cast<std::size_t>(i)];
    SCOPED_TRACE("guest " + std::to_string(i));
    EXPECT_EQ(r.exit_code, 1) << r.err;  // the guest's debug-exit after kCellTicks
    ASSERT_TRUE(r.stats.has_value()) << r.err;
    const std::string pit = (*r.stats)["devices"]["pit"].dump();
    EXPECT_EQ((*r.stats)["guest"]["ticks_lost"].get<std::uint64_t>(), 0u) << pit;
    const auto st = parse_stamps(r.out);
    ASSERT_TRUE(st.has_value()) << "no stamps line in the console: " << r.out;
    EXPECT_EQ(st->ticks, static_cast<unsigned long long>(kCellTicks));
    const double elapsed = static_cast<double>(st->elapsed_us) / 1e6;
    const double gap = static_cast<double>(st->gap_max_us) / 1e6;
    EXPECT_LE(elapsed, kCellMaxElapsedS) << "the guest's clock fell behind: " << pit;
    EXPECT_LT(gap, kCellMaxGapS) << "a stall of " << gap << " s: " << pit;
    worst_elapsed = std::max(worst_elapsed, elapsed);
    worst_gap = std::max(worst_gap, gap);
  }
  RecordProperty("worst_elapsed_s", std::to_string(worst_elapsed));
  RecordProperty("worst_gap_s", std::to_string(worst_gap));
}

}  // namespace
}  // namespace minivmm::testing
