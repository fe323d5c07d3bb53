// Pauses a ticking guest through the control socket: while paused no tick arrives, and on
// resume none of the paused time is replayed as a burst.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "control_client.h"
#include "run_minivmm.h"

namespace minivmm::testing {
namespace {

using namespace std::chrono_literals;

// Polls `done` for progress only: the limit is generous (seconds for what takes one).
template <typename Pred>
bool eventually(Pred done) {
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

std::uint64_t ticks(const nlohmann::json& reply) {
  return reply["stats"]["guest"]["ticks_injected"].get<std::uint64_t>();
}

// Whoever delivers the PIT's ticks: the loop (its vm_clock timers stop), the vCPU (which
// disarms its timer while parked and re-arms on resume) or the kernel (the armed edges are
// withdrawn on pause and re-armed on the grid on resume).
class BootPauseTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BootPauseTest, PausedGuestGetsNoTicksAndNoBurstOnResume) {
  if (auto why = kvm_unavailable_reason()) GTEST_SKIP() << "KVM boot test skipped: " << *why;
  const std::string sock = "/tmp/minivmm-pause-test-" + std::to_string(getpid()) + "-" +
                           GetParam() + ".sock";
  Child child = start_minivmm({"run", "--kernel", guest_image(), "--cmdline",
                               "timer=pit hz=250 ticks=0", "--api-socket", sock,
                               "--duration", "30", "--no-console-input", "--pit-tick",
                               GetParam()});
  ControlClient client(sock);
  ASSERT_TRUE(client.connected());
  struct stat st {};
  ASSERT_EQ(stat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only the socket's owner may connect";

  // Every bound below is counted in vm_clock time, which the report gives with each count: a
  // busy host delays when a tick lands (and when this test looks), never how many the grid of
  // vm time holds. 250 Hz from a start a moment before vm time 0.
  const auto at_most = [](const nlohmann::json& stats) {
    return static_cast<std::uint64_t>(stats["stats"]["time"]["vm_s"].get<double>() * 250) + 2;
  };
  ASSERT_TRUE(wait_for_console(child, "tick 250")) << "the guest never ticked";
  auto r = client.call("pause");
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["state"], "paused");
  const auto at_pause = client.call("stats");
  EXPECT_GE(ticks(at_pause), 250u);
  EXPECT_TRUE(at_pause["stats"]["time"]["paused"].get<bool>());

  std::this_thread::sleep_for(1s);
  const auto still_paused = client.call("stats");
  EXPECT_EQ(ticks(still_paused), ticks(at_pause)) << "ticks arrived while paused";
  EXPECT_DOUBLE_EQ(still_paused["stats"]["time"]["vm_s"].get<double>(),
                   at_pause["stats"]["time"]["vm_s"].get<double>())
      << "vm_clock moved while paused";

  r = client.call("resume");
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  // A replay of the paused second would be ~250 ticks beyond the grid of vm time.
  const auto resumed = client.call("stats");
  EXPECT_LE(ticks(resumed), at_most(resumed)) << "burst of ticks on resume";
  // Ticking again, at the grid's rate and no faster.
  nlohmann::json later;
  const bool ticking = eventually([&] {
    later = client.call("stats");
    return ticks(later) >= ticks(resumed) + 200;
  });
  EXPECT_TRUE(ticking) << "the guest did not tick again after the resume";
  EXPECT_LE(ticks(later), at_most(later)) << "more ticks than vm time holds";

  r = client.call("quit");
  EXPECT_TRUE(r["ok"].get<bool>());
  RunResult res = finish_minivmm(child);
  EXPECT_EQ(res.exit_code, 0) << res.err;
  ASSERT_TRUE(res.stats.has_value());
  EXPECT_GT((*res.stats)["time"]["paused_s"].get<double>(), 0.9);
  EXPECT_EQ(access(sock.c_str(), F_OK), -1) << "socket file left behind";
  if (GetParam() == "vcpu") {
    const auto& vt = (*res.stats)["vcpu_timers"];
    // None on a quiet host; see boot_test.cc for the one seen beside catch-ups.
    EXPECT_LE(vt["false_wakeups"].get<std::uint64_t>(), vcpu_catch_ups(*res.stats)) << vt.dump();
    EXPECT_GE(vt["alarm_disarms"].get<std::uint64_t>(), 1u) << "the parked vCPU kept its timer";
  }
  if (GetParam() == "kernel") {
    const auto& kt = (*res.stats)["devices"]["pit"]["kernel_train"];
    // Re-armed on the grid after the pause, unless the PIT had already given the train up for
    // its own timer (a host too busy to run KVM's injection worker in time: issue 25's
    // fallback, seen under nested KVM), which then delivers across the pause instead.
    const auto& pit = (*res.stats)["devices"]["pit"];
    if (pit["train_fallbacks"].get<std::uint64_t>() == 0) {
      EXPECT_GE(kt["generations"].get<std::uint64_t>(), 2u) << "not re-armed after the pause";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PitTick, BootPauseTest, ::testing::Values("loop", "vcpu", "kernel"));

}  // namespace
}  // namespace minivmm::testing
