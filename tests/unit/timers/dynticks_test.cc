#include "timers/dynticks.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/fake_alarm.h"
#include "tests/support/fake_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer.h"
#include "timers/vm_clock.h"

namespace minivmm::timers {
namespace {

using testing::FakeAlarm;
using testing::FakeClock;
using namespace std::chrono_literals;

// A vm_clock and an rt_clock list on one fake host clock, driven the way the loop drives them.
struct DynticksFixture {
  FakeClock host{1s};
  VmClock vm{host};
  TimerList vm_list{ClockType::kVm, vm};
  TimerList rt_list{ClockType::kRt, host};
  FakeAlarm alarm;
  Dynticks dynticks{alarm, host, {&vm_list, &rt_list}, DynticksOptions{20us}};
};

TEST(DynticksTest, BothClocksExpiringInOnePassArmOnce) {
  // The 2008 QEMU scenario: an rt_clock timer and vm_clock timers all due in the same pass used
  // to rearm after each queue; now the alarm is touched exactly once.
  DynticksFixture f;
  int ran = 0;
  Timer v1(f.vm_list, "v1", [&](const Timer::Expiry&) { ++ran; });
  Timer v2(f.vm_list, "v2", [&](const Timer::Expiry&) { ++ran; });
  Timer r1(f.rt_list, "r1", [&](const Timer::Expiry&) { ++ran; });
  Timer later(f.vm_list, "later", [](const Timer::Expiry&) {});
  v1.arm_at(1s + 1ms);
  v2.arm_at(1s + 1ms);
  r1.arm_at(1s + 1ms);
  later.arm_at(1s + 10ms);
  ASSERT_TRUE(f.dynticks.rearm());
  f.alarm.arms.clear();

  f.host.set(1s + 1ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(ran, 3);
  ASSERT_EQ(f.alarm.arms.size(), 1u);
  EXPECT_EQ(f.alarm.arms[0].deadline, 1s + 10ms);
  EXPECT_EQ(f.dynticks.stats().timers_run, 3u);
}

TEST(DynticksTest, UnchangedDeadlineCostsNoArm) {
  DynticksFixture f;
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  t.arm_at(1s + 5ms);
  ASSERT_TRUE(f.dynticks.rearm());
  ASSERT_EQ(f.alarm.arms.size(), 1u);
  // Wakeups for other reasons (a vCPU arm of a later timer, say) leave the deadline alone.
  Timer other(f.rt_list, "other", [](const Timer::Expiry&) {});
  other.arm_at(2s);
  ASSERT_TRUE(f.dynticks.run_timers(false));
  ASSERT_TRUE(f.dynticks.run_timers(false));
  EXPECT_EQ(f.alarm.arms.size(), 1u);
  EXPECT_EQ(f.dynticks.stats().arms_skipped, 2u);
}

TEST(DynticksTest, PausedVmClockDropsOutAndItsTimersDoNotFire) {
  DynticksFixture f;
  int vm_runs = 0;
  Timer v(f.vm_list, "v", [&](const Timer::Expiry&) { ++vm_runs; });
  Timer r(f.rt_list, "r", [](const Timer::Expiry&) {});
  v.arm_at(1s + 1ms);
  r.arm_at(1s + 50ms);
  ASSERT_TRUE(f.dynticks.rearm());
  EXPECT_EQ(f.dynticks.deadline(), 1s + 1ms);

  f.vm.pause();
  ASSERT_TRUE(f.dynticks.rearm());
  EXPECT_EQ(f.dynticks.deadline(), 1s + 50ms);  // only the rt timer remains

  f.host.set(1s + 50ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(vm_runs, 0);

  // Resume after 50 ms: the vm timer is still 1 ms of guest time away, not overdue.
  f.vm.resume();
  ASSERT_TRUE(f.dynticks.rearm());
  EXPECT_EQ(f.dynticks.deadline(), 1s + 51ms);
}

TEST(DynticksTest, NothingPendingDisarmsOnceAndThenStaysQuiet) {
  DynticksFixture f;
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  t.arm_at(1s + 1ms);
  ASSERT_TRUE(f.dynticks.rearm());
  f.host.set(1s + 1ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(f.alarm.disarms, 1);
  EXPECT_FALSE(f.dynticks.deadline().has_value());
  ASSERT_TRUE(f.dynticks.run_timers(false));
  EXPECT_EQ(f.alarm.disarms, 1);
}

TEST(DynticksTest, AlarmWakeupWithNothingDueIsAFalseWakeup) {
  DynticksFixture f;
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  t.arm_at(1s + 5ms);
  ASSERT_TRUE(f.dynticks.rearm());
  f.host.set(1s + 1ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(f.dynticks.stats().false_wakeups, 1u);
  f.host.set(1s + 5ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(f.dynticks.stats().false_wakeups, 1u);
}

TEST(DynticksTest, WakeupForACancelledTimerIsNotFalse) {
  DynticksFixture f;
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  Timer later(f.vm_list, "later", [](const Timer::Expiry&) {});
  t.arm_at(1s + 2ms);
  later.arm_at(1s + 9ms);
  ASSERT_TRUE(f.dynticks.rearm());
  t.cancel();  // e.g. from a vCPU thread: the alarm stays armed for 2 ms
  f.host.set(1s + 2ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(f.dynticks.stats().false_wakeups, 0u);
  EXPECT_EQ(f.dynticks.stats().cancelled_wakeups, 1u);
  EXPECT_EQ(f.dynticks.deadline(), 1s + 9ms);
}

TEST(DynticksTest, ReadsTheClockOncePerPass) {
  DynticksFixture f;
  Timer a(f.vm_list, "a", [](const Timer::Expiry&) {});
  Timer b(f.rt_list, "b", [](const Timer::Expiry&) {});
  a.arm_periodic(1s + 1ms, 1ms);
  b.arm_periodic(1s + 1ms, 1ms);
  ASSERT_TRUE(f.dynticks.rearm());
  const auto before = f.host.reads();
  for (int i = 1; i <= 10; ++i) {
    f.host.set(1s + i * 1ms);
    ASSERT_TRUE(f.dynticks.run_timers(true));
  }
  EXPECT_EQ(f.host.reads() - before, 10u);
  EXPECT_EQ(f.dynticks.stats().timers_run, 20u);
}

TEST(DynticksTest, SteadyPeriodicTimerArmsTheHostIntervalOnce) {
  DynticksFixture f;
  int ticks = 0;
  Timer pit(f.vm_list, "pit", [&](const Timer::Expiry&) { ++ticks; });
  pit.arm_periodic(1s + 4ms, 4ms);
  ASSERT_TRUE(f.dynticks.rearm());
  ASSERT_EQ(f.alarm.arms.size(), 1u);
  EXPECT_EQ(f.alarm.arms[0].deadline, 1s + 4ms);
  EXPECT_EQ(f.alarm.arms[0].interval, 4ms);
  for (int i = 1; i <= 250; ++i) {
    f.host.set(1s + i * 4ms + 30us);  // each wakeup a little late, as real ones are
    ASSERT_TRUE(f.dynticks.run_timers(true));
  }
  EXPECT_EQ(ticks, 250);
  EXPECT_EQ(f.alarm.arms.size(), 1u);
  EXPECT_EQ(f.dynticks.stats().arms_skipped, 250u);
  EXPECT_EQ(f.dynticks.stats().false_wakeups, 0u);
}

TEST(DynticksTest, PeriodChangeRearmsWithTheNewInterval) {
  DynticksFixture f;
  Timer pit(f.vm_list, "pit", [](const Timer::Expiry&) {});
  pit.arm_periodic(1s + 4ms, 4ms);
  ASSERT_TRUE(f.dynticks.rearm());
  pit.arm_periodic(1s + 1ms, 1ms);
  ASSERT_TRUE(f.dynticks.rearm());
  ASSERT_EQ(f.alarm.arms.size(), 2u);
  EXPECT_EQ(f.alarm.arms[1].interval, 1ms);
}

TEST(DynticksTest, EarlierOneShotInterruptsThePeriodicGrid) {
  DynticksFixture f;
  Timer pit(f.vm_list, "pit", [](const Timer::Expiry&) {});
  Timer once(f.rt_list, "once", [](const Timer::Expiry&) {});
  pit.arm_periodic(1s + 4ms, 4ms);
  ASSERT_TRUE(f.dynticks.rearm());
  once.arm_at(1s + 2ms);
  ASSERT_TRUE(f.dynticks.rearm());
  ASSERT_EQ(f.alarm.arms.size(), 2u);
  EXPECT_EQ(f.alarm.arms[1].deadline, 1s + 2ms);
  EXPECT_EQ(f.alarm.arms[1].interval, 0ns);
  f.host.set(1s + 2ms);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  ASSERT_EQ(f.alarm.arms.size(), 3u);  // back on the periodic timer's grid
  EXPECT_EQ(f.alarm.arms[2].deadline, 1s + 4ms);
  EXPECT_EQ(f.alarm.arms[2].interval, 4ms);
}

TEST(DynticksTest, DeadlineInThePastIsClampedToMinDeltaNeverZero) {
  DynticksFixture f;
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  t.arm_at(0ns);
  ASSERT_TRUE(f.dynticks.rearm());
  ASSERT_EQ(f.alarm.arms.size(), 1u);
  EXPECT_EQ(f.alarm.arms[0].deadline, 1s + 20us);
  EXPECT_EQ(f.alarm.arms[0].interval, 0ns);
  EXPECT_EQ(f.dynticks.stats().clamped, 1u);
}

TEST(DynticksTest, LoopThreadArmMarksStaleWithoutWaking) {
  DynticksFixture f;
  int wakes = 0;
  f.dynticks.set_wake([&] { ++wakes; });
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  t.arm_at(1s + 1ms);
  EXPECT_TRUE(f.dynticks.stale());
  EXPECT_EQ(wakes, 0);
  ASSERT_TRUE(f.dynticks.rearm());
  EXPECT_FALSE(f.dynticks.stale());
}

TEST(DynticksTest, OtherThreadArmWakesLoopOnlyWhenItMovesTheHeadEarlier) {
  DynticksFixture f;
  std::atomic<int> wakes{0};
  f.dynticks.set_wake([&] { ++wakes; });
  Timer head(f.vm_list, "head", [](const Timer::Expiry&) {});
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  head.arm_at(1s + 5ms);
  ASSERT_TRUE(f.dynticks.rearm());
  std::thread([&] { t.arm_at(1s + 9ms); }).join();  // later than the head: no wake
  EXPECT_EQ(wakes.load(), 0);
  std::thread([&] { t.arm_at(1s + 1ms); }).join();  // earlier: wake the loop
  EXPECT_EQ(wakes.load(), 1);
}

TEST(DynticksTest, OtherThreadArmWithinSlackOfTheArmedDeadlineDoesNotWake) {
  DynticksFixture f;
  std::atomic<int> wakes{0};
  f.dynticks.set_wake([&] { ++wakes; });
  Timer tick(f.rt_list, "tick", [](const Timer::Expiry&) {});
  Timer flush(f.vm_list, "flush", [](const Timer::Expiry&) {});
  flush.set_slack(20ms);
  tick.arm_at(1s + 4ms);
  ASSERT_TRUE(f.dynticks.rearm());
  // Due at 2 ms, may run up to 22 ms: the loop wakes at 4 ms anyway and runs it then.
  std::thread([&] { flush.arm_at(1s + 2ms); }).join();
  EXPECT_EQ(wakes.load(), 0);
  EXPECT_EQ(f.dynticks.stats().cross_thread_arms_absorbed, 1u);
  f.host.set(1s + 4ms);
  int ran_before = static_cast<int>(f.dynticks.stats().timers_run);
  ASSERT_TRUE(f.dynticks.run_timers(true));
  EXPECT_EQ(static_cast<int>(f.dynticks.stats().timers_run) - ran_before, 2);
}

TEST(DynticksTest, OtherThreadArmWithSlackStillWakesAnIdleLoop) {
  DynticksFixture f;
  std::atomic<int> wakes{0};
  f.dynticks.set_wake([&] { ++wakes; });
  Timer flush(f.vm_list, "flush", [](const Timer::Expiry&) {});
  flush.set_slack(20ms);
  ASSERT_TRUE(f.dynticks.rearm());  // nothing armed: the loop would sleep forever
  std::thread([&] { flush.arm_at(1s + 2ms); }).join();
  EXPECT_EQ(wakes.load(), 1);
  EXPECT_EQ(f.dynticks.stats().cross_thread_wakes, 1u);
}

TEST(DynticksTest, PollTimeoutAlarmNeedsNoSyscallAndGivesTheTimeout) {
  FakeClock host{1s};
  TimerList list{ClockType::kRt, host};
  PollTimeoutAlarm alarm;
  Dynticks d{alarm, host, {&list}};
  Timer t(list, "t", [](const Timer::Expiry&) {});
  t.arm_at(1s + 3ms);
  ASSERT_TRUE(d.rearm());
  EXPECT_EQ(d.poll_timeout(), 3ms);
  EXPECT_EQ(d.stats().arms, 0u);
}

TEST(DynticksTest, AlarmFailureIsReported) {
  DynticksFixture f;
  f.alarm.fail = true;
  Timer t(f.vm_list, "t", [](const Timer::Expiry&) {});
  t.arm_at(1s + 1ms);
  EXPECT_FALSE(f.dynticks.rearm());
  EXPECT_EQ(f.dynticks.stats().alarm_failures, 1u);
}

}  // namespace
}  // namespace minivmm::timers
