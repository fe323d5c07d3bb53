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

  std::this_thread::sleep_for(1s);  // let the guest tick for a while
  auto r = client.call("pause");
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["state"], "paused");
  const auto at_pause = client.call("stats");
  EXPECT_GT(ticks(at_pause), 150u);
  EXPECT_TRUE(at_pause["stats"]["time"]["paused"].get<bool>());

  std::this_thread::sleep_for(1s);
  const auto still_paused = client.call("stats");
  EXPECT_EQ(ticks(still_paused), ticks(at_pause)) << "ticks arrived while paused";
  EXPECT_DOUBLE_EQ(still_paused["stats"]["time"]["vm_s"].get<double>(),
                   at_pause["stats"]["time"]["vm_s"].get<double>())
      << "vm_clock moved while paused";

  r = client.call("resume");
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  const auto resumed = client.call("stats");
  // A replay of the paused second would be ~250 ticks at once.
  EXPECT_LE(ticks(resumed) - ticks(still_paused), 2u) << "burst of ticks on resume";

  std::this_thread::sleep_for(1s);
  const auto later = client.call("stats");
  const auto delta = ticks(later) - ticks(resumed);
  EXPECT_GT(delta, 200u);  // ticking again at 250 Hz (this host's timing is noisy)
  EXPECT_LT(delta, 300u);

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
    EXPECT_GE(kt["generations"].get<std::uint64_t>(), 2u) << "not re-armed after the pause";
  }
}

INSTANTIATE_TEST_SUITE_P(PitTick, BootPauseTest, ::testing::Values("loop", "vcpu", "kernel"));

}  // namespace
}  // namespace minivmm::testing
