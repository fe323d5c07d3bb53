#include "timers/vm_clock.h"

#include <gtest/gtest.h>

#include "tests/support/fake_clock.h"

namespace minivmm::timers {
namespace {

using testing::FakeClock;
using namespace std::chrono_literals;

TEST(VmClockTest, FollowsBaseWhileRunning) {
  FakeClock base(1s);
  VmClock vm(base);
  EXPECT_EQ(vm.now(), 1s);
  base.advance(5ms);
  EXPECT_EQ(vm.now(), 1s + 5ms);
  EXPECT_EQ(vm.to_monotonic(2s), 2s);
}

TEST(VmClockTest, StandsStillWhilePausedAndExcludesPausedTime) {
  FakeClock base(1s);
  VmClock vm(base);
  base.advance(10ms);
  vm.pause();
  EXPECT_TRUE(vm.paused());
  base.advance(1s);
  EXPECT_EQ(vm.now(), 1s + 10ms);
  EXPECT_FALSE(vm.to_monotonic(2s).has_value());
  vm.resume();
  EXPECT_EQ(vm.now(), 1s + 10ms);
  base.advance(1ms);
  EXPECT_EQ(vm.now(), 1s + 11ms);
  EXPECT_EQ(vm.paused_total(), 1s);
  // A vm_clock deadline now maps one paused second later in host time.
  EXPECT_EQ(vm.to_monotonic(1s + 20ms), 2s + 20ms);
  EXPECT_EQ(vm.from_monotonic(2s + 20ms), 1s + 20ms);
}

TEST(VmClockTest, PauseAndResumeAreIdempotent) {
  FakeClock base(1s);
  VmClock vm(base);
  vm.pause();
  vm.pause();
  base.advance(1s);
  vm.resume();
  vm.resume();
  EXPECT_EQ(vm.now(), 1s);
}

// A restored VM's clock: paused at the snapshot's instant whatever the host's clock says (a
// fresh process, hours later), and running on from there.
TEST(VmClockTest, ARestoredClockCarriesOnFromTheSnapshotsInstant) {
  FakeClock base(100s);
  VmClock vm(base);
  vm.set_paused_at(7s);
  EXPECT_TRUE(vm.paused());
  EXPECT_EQ(vm.now(), 7s);
  base.advance(30s);
  EXPECT_EQ(vm.now(), 7s);
  vm.resume();
  EXPECT_EQ(vm.now(), 7s);
  base.advance(4ms);
  EXPECT_EQ(vm.now(), 7s + 4ms);
  EXPECT_EQ(vm.to_monotonic(7s + 10ms), 130s + 10ms);
}

}  // namespace
}  // namespace minivmm::timers
