#include "timers/timer_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/fake_clock.h"
#include "tests/support/time_driver.h"
#include "timers/timer.h"

namespace minivmm::timers {
namespace {

using testing::FakeClock;
using namespace std::chrono_literals;

TEST(TimerListTest, EmptyListHasNoDeadline) {
  FakeClock clock;
  TimerList list(ClockType::kVm, clock);
  EXPECT_FALSE(list.next_deadline().has_value());
  EXPECT_EQ(list.run_expired(clock.now()), 0u);
}

TEST(TimerListTest, RunsOnlyExpiredTimersInDeadlineOrder) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  std::vector<std::string> order;
  Timer a(list, "a", [&](const Timer::Expiry&) { order.push_back("a"); });
  Timer b(list, "b", [&](const Timer::Expiry&) { order.push_back("b"); });
  Timer c(list, "c", [&](const Timer::Expiry&) { order.push_back("c"); });
  c.arm_at(30ns);
  a.arm_at(10ns);
  b.arm_at(20ns);
  EXPECT_EQ(list.next_deadline(), 10ns);
  EXPECT_EQ(list.run_expired(20ns), 2u);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.pending());
  EXPECT_FALSE(a.pending());
}

TEST(TimerListTest, EqualDeadlinesFireInArmOrder) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  std::string order;
  Timer x(list, "x", [&](const Timer::Expiry&) { order += "x"; });
  Timer y(list, "y", [&](const Timer::Expiry&) { order += "y"; });
  Timer z(list, "z", [&](const Timer::Expiry&) { order += "z"; });
  y.arm_at(5ns);
  z.arm_at(5ns);
  x.arm_at(5ns);
  list.run_expired(5ns);
  EXPECT_EQ(order, "yzx");
}

TEST(TimerListTest, CallbackMayRearmItselfButRunsNextPass) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  int runs = 0;
  Timer* self = nullptr;
  Timer t(list, "t", [&](const Timer::Expiry& e) {
    ++runs;
    self->arm_at(e.deadline);  // "now" again: must not run twice in one pass
  });
  self = &t;
  t.arm_at(1ns);
  EXPECT_EQ(list.run_expired(1ns), 1u);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(t.pending());
  EXPECT_EQ(list.run_expired(1ns), 1u);
  EXPECT_EQ(runs, 2);
}

TEST(TimerListTest, CallbackMayCancelAnotherDueTimer) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  int b_runs = 0;
  Timer b(list, "b", [&](const Timer::Expiry&) { ++b_runs; });
  Timer a(list, "a", [&](const Timer::Expiry&) { b.cancel(); });
  a.arm_at(1ns);
  b.arm_at(2ns);
  EXPECT_EQ(list.run_expired(5ns), 1u);
  EXPECT_EQ(b_runs, 0);
}

TEST(TimerListTest, CallbackMayArmAnotherTimer) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  int b_runs = 0;
  Timer b(list, "b", [&](const Timer::Expiry&) { ++b_runs; });
  Timer a(list, "a", [&](const Timer::Expiry&) { b.arm_at(3ns); });
  a.arm_at(1ns);
  list.run_expired(2ns);
  EXPECT_EQ(list.next_deadline(), 3ns);
  list.run_expired(3ns);
  EXPECT_EQ(b_runs, 1);
}

TEST(TimerListTest, PeriodicTimerFiresOnFixedGrid) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  std::vector<Nanos> deadlines;
  Timer t(list, "tick", [&](const Timer::Expiry& e) { deadlines.push_back(e.deadline); });
  t.arm_periodic(4ms, 4ms);
  EXPECT_EQ(list.head_period(), 4ms);
  // 10 ms of virtual time, in one call of the driver: expiries at 4 and 8 ms.
  testing::advance(clock, list, 10ms);
  EXPECT_EQ(deadlines, (std::vector<Nanos>{4ms, 8ms}));
  EXPECT_EQ(t.deadline(), 12ms);
  EXPECT_EQ(t.fired(), 2u);
}

TEST(TimerListTest, LatePeriodicTimerDeliversOnePerPass) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  int runs = 0;
  Timer t(list, "tick", [&](const Timer::Expiry&) { ++runs; });
  t.arm_periodic(1ms, 1ms);
  clock.advance(5ms + 500us);  // a host stall: five grid points passed
  for (int pass = 1; pass <= 5; ++pass) {
    EXPECT_EQ(list.run_expired(clock.now()), 1u);
    EXPECT_EQ(runs, pass);
  }
  EXPECT_EQ(list.run_expired(clock.now()), 0u);
  EXPECT_EQ(t.deadline(), 6ms);
}

TEST(TimerListTest, HeadChangedHookOnlyWhenArmBecomesHead) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  int hooks = 0;
  Nanos last_deadline{0};
  list.set_head_changed_hook([&](const TimerList&, Nanos deadline, Nanos) {
    ++hooks;
    last_deadline = deadline;
  });
  Timer a(list, "a", [](const Timer::Expiry&) {});
  Timer b(list, "b", [](const Timer::Expiry&) {});
  a.arm_at(10ns);
  EXPECT_EQ(hooks, 1);
  b.arm_at(20ns);  // later than the head: nothing to tell
  EXPECT_EQ(hooks, 1);
  b.arm_at(5ns);  // earlier: new head
  EXPECT_EQ(hooks, 2);
  EXPECT_EQ(last_deadline, 5ns);
}

TEST(TimerListTest, DestroyedTimerLeavesList) {
  FakeClock clock(0ns);
  TimerList list(ClockType::kVm, clock);
  {
    Timer t(list, "t", [](const Timer::Expiry&) {});
    t.arm_at(1ns);
    EXPECT_TRUE(list.next_deadline().has_value());
  }
  EXPECT_FALSE(list.next_deadline().has_value());
}

TEST(TimerListTest, ArmAfterIsRelativeToTheListClock) {
  FakeClock clock(100ns);
  TimerList list(ClockType::kRt, clock);
  Timer t(list, "t", [](const Timer::Expiry&) {});
  t.arm_after(50ns);
  EXPECT_EQ(t.deadline(), 150ns);
}

}  // namespace
}  // namespace minivmm::timers
