// Many idle guests at once on this two-CPU host: every guest must count every tick of its PIT
// in time (issue #12's density goal, the short form of scripts/density.py's 32 x 30 s run).
// A guest whose vCPU the host runs late leaves IRQ0 pending, and the on-time ticks that follow
// merge with it; the PIT's acknowledgement audit must find and redeliver them. Without it a
// guest here took 5.7 s to count 3 s of ticks while the report said 0 lost.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/run_minivmm.h"

namespace minivmm::testing {
namespace {

constexpr int kGuests = 16;
constexpr int kHz = 250;
constexpr int kTicks = 1000;  // 4 s each
// Boot, process start-up and the guest's set-up, on a host with 16 guests starting at once
// and every guest instruction emulated (about 0.5 us each here).
constexpr double kSlackSeconds = 3.0;

class BootDensityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BootDensityTest, EveryGuestCountsEveryTickInTime) {
  SKIP_WITHOUT_KVM();
  std::vector<Child> children;
  for (int i = 0; i < kGuests; ++i) {
    children.push_back(start_minivmm(
        {"run", "--kernel", guest_image(), "--cmdline",
         "timer=pit hz=" + std::to_string(kHz) + " ticks=" + std::to_string(kTicks),
         "--pit-tick", GetParam(), "--no-console-input", "--duration", "60"}));
  }
  std::uint64_t merged = 0;
  for (int i = 0; i < kGuests; ++i) {
    const RunResult r = finish_minivmm(children[static_cast<std::size_t>(i)], 90);
    SCOPED_TRACE("guest " + std::to_string(i));
    // Status 1: the guest's own debug-exit after it counted kTicks interrupts.
    EXPECT_EQ(r.exit_code, 1) << r.err;
    ASSERT_TRUE(r.stats.has_value()) << r.err;
    const auto& s = *r.stats;
    // On failure, what the PIT saw: merged, owed, lost, audits.
    const std::string pit = s["devices"]["pit"].dump();
    EXPECT_EQ(s["guest"]["ticks_lost"].get<std::uint64_t>(), 0u) << pit;
    // Injected counts what reached the guest (merged edges are taken off): the guest's count,
    // give or take the few edges in doubt (one at the end; a probe now and then that was
    // counted merged but was taken: 2 in 30000 at 1000 Hz with the host busy).
    const auto injected = s["guest"]["ticks_injected"].get<std::uint64_t>();
    EXPECT_GE(injected, static_cast<std::uint64_t>(kTicks) - 3) << pit;
    // And above, the ticks that arrive while the guest prints its last line and exits, as in
    // the boot test (50 ms worth): with 16 guests on 2 CPUs an exit can take that long (CI saw
    // 1005).
    EXPECT_LE(injected, static_cast<std::uint64_t>(kTicks) + 2 + kHz / 20) << pit;
    // A guest that had lost ticks would need longer than kTicks periods to count them.
    EXPECT_LT(s["time"]["wall_s"].get<double>(), kTicks / double(kHz) + kSlackSeconds)
        << "vm_s " << s["time"]["vm_s"] << ", " << pit;
    merged += s["devices"]["pit"]["ticks_merged"].get<std::uint64_t>();
    // What one more guest costs in memory beyond its RAM: its private pages (shared libraries
    // are shared); issue #12's goal is 5 MiB. A sanitizer's shadow memory (about 11 MiB
    // under ASan) is not the VMM's.
#ifndef MINIVMM_SANITIZER_RUNTIME
    EXPECT_LT(s["host"]["memory"]["vmm_anon_kib"].get<std::uint64_t>(), 5u * 1024);
#endif
#ifdef MINIVMM_LEAN_RUNTIME
    // And the goal itself, RSS beyond guest RAM, shared pages included: with libstdc++ linked
    // in and spdlog compiled in (3.6 MiB here; 5.8 MiB with Debian's shared libraries).
    EXPECT_LT(s["host"]["memory"]["vmm_rss_kib"].get<std::uint64_t>(), 5u * 1024);
#endif
  }
  RecordProperty("ticks_merged_total", std::to_string(merged));
}

INSTANTIATE_TEST_SUITE_P(PitTick, BootDensityTest, ::testing::Values("loop", "kernel"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace minivmm::testing
