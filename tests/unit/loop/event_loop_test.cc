// Backend contract: every poll backend must pass the same expectations. These use real fds and
// the real monotonic clock, but only zero or sub-millisecond timeouts.
#include "loop/event_loop.h"

#include <gtest/gtest.h>

#include "tests/support/test_pipe.h"
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer.h"

namespace minivmm::loop {
namespace {

using namespace std::chrono_literals;

using Pipe = testing::TestPipe;

class EventLoopTest : public ::testing::TestWithParam<PollerKind> {
 protected:
  timers::MonotonicClock clock_;
  timers::TimerList rt_{timers::ClockType::kRt, clock_};
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, clock_, {&rt_}};
  EventLoop loop_{make_poller(GetParam()), dynticks_};

  // Iterates until `done` or `max` iterations; each wait is bounded by the armed timers, or
  // returns at once when something is ready.
  void spin_until(const std::function<bool()>& done, int max = 100) {
    for (int i = 0; i < max && !done(); ++i) ASSERT_TRUE(loop_.run_once());
  }
};

TEST_P(EventLoopTest, ReadableFdRunsItsCallback) {
  Pipe p;
  int calls = 0;
  loop_.watch(p.r, kReadable, FdHandlers{[&] { ++calls; p.drain(); }, {}, {}});
  p.put();
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(calls, 1);
}

TEST_P(EventLoopTest, WritableFdRunsItsCallback) {
  Pipe p;
  int calls = 0;
  loop_.watch(p.w, kWritable, FdHandlers{{}, [&] { ++calls; }, {}});
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(calls, 1);
}

TEST_P(EventLoopTest, HangupIsReported) {
  Pipe p;
  int hangups = 0;
  loop_.watch(p.r, kReadable, FdHandlers{[] {}, {}, [&] { ++hangups; }});
  close(p.w);
  p.w = -1;
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(hangups, 1);
}

TEST_P(EventLoopTest, TimeoutHasNanosecondResolutionAndNeverFiresEarly) {
  int fired = 0;
  timers::Nanos fired_at{0};
  timers::Timer t(rt_, "t", [&](const timers::Timer::Expiry& e) {
    ++fired;
    fired_at = e.now;
  });
  const timers::Nanos deadline = clock_.now() + 300'123ns;
  t.arm_at(deadline);
  spin_until([&] { return fired > 0; });
  ASSERT_EQ(fired, 1);
  EXPECT_GE(fired_at, deadline);
  EXPECT_EQ(dynticks_.stats().false_wakeups, 0u);
}

TEST_P(EventLoopTest, RemovalDuringDispatchSkipsTheRemovedFd) {
  Pipe a, b;
  int a_calls = 0, b_calls = 0;
  loop_.watch(a.r, kReadable, FdHandlers{[&] { ++a_calls; a.drain(); loop_.unwatch(b.r); }, {}, {}});
  loop_.watch(b.r, kReadable, FdHandlers{[&] { ++b_calls; b.drain(); loop_.unwatch(a.r); }, {}, {}});
  a.put();
  b.put();
  ASSERT_TRUE(loop_.run_once());
  // Whichever ran first removed the other, in the same batch.
  EXPECT_EQ(a_calls + b_calls, 1);
}

TEST_P(EventLoopTest, CallbackMayUnwatchItself) {
  Pipe p;
  int calls = 0;
  loop_.watch(p.r, kReadable, FdHandlers{[&] { ++calls; loop_.unwatch(p.r); }, {}, {}});
  p.put();
  ASSERT_TRUE(loop_.run_once());
  loop_.schedule([] {});  // a zero-timeout wait: nothing else would end it
  ASSERT_TRUE(loop_.run_once());  // still readable, but no longer watched
  EXPECT_EQ(calls, 1);
}

TEST_P(EventLoopTest, CallbackMayAddAnFd) {
  Pipe a, b;
  int b_calls = 0;
  loop_.watch(a.r, kReadable, FdHandlers{[&] {
                a.drain();
                loop_.watch(b.r, kReadable, FdHandlers{[&] { ++b_calls; b.drain(); }, {}, {}});
              }, {}, {}});
  a.put();
  b.put();
  ASSERT_TRUE(loop_.run_once());
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(b_calls, 1);
}

TEST_P(EventLoopTest, ThousandFdsOnlyTheReadyOneRuns) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 1200) {
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 4096);
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  std::vector<int> fds;
  std::vector<int> calls(1024, 0);
  for (int i = 0; i < 1024; ++i) {
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(fd, 0) << "fd limit too low for this test";
    fds.push_back(fd);
    loop_.watch(fd, kReadable, FdHandlers{[&, i, fd] {
                  ++calls[static_cast<std::size_t>(i)];
                  std::uint64_t v;
                  ASSERT_EQ(read(fd, &v, sizeof v), 8);
                }, {}, {}});
  }
  EXPECT_EQ(loop_.poller().size(), 1024u + 1);  // plus the wake eventfd
  const std::uint64_t one = 1;
  ASSERT_EQ(write(fds[777], &one, sizeof one), 8);
  ASSERT_TRUE(loop_.run_once());
  for (int i = 0; i < 1024; ++i) EXPECT_EQ(calls[static_cast<std::size_t>(i)], i == 777 ? 1 : 0);
  for (int fd : fds) {
    loop_.unwatch(fd);
    close(fd);
  }
}

TEST_P(EventLoopTest, WakeFromAnotherThreadEndsABlockingWait) {
  std::thread t([&] { loop_.wake(); });
  ASSERT_TRUE(loop_.run_once());  // no timer, no fd: only the wake can end this wait
  t.join();
  EXPECT_EQ(loop_.stats().wake_events, 1u);
}

TEST_P(EventLoopTest, BottomHalfScheduledFromAnotherThreadRunsOnTheLoopThread) {
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  std::thread t([&] {
    loop_.schedule([&] {
      ran_on = std::this_thread::get_id();
      ran = true;
    });
  });
  t.join();
  spin_until([&] { return ran.load(); });
  EXPECT_TRUE(ran);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST_P(EventLoopTest, StopFromAnotherThreadEndsRun) {
  std::thread t([&] { loop_.stop(); });
  EXPECT_TRUE(loop_.run());
  t.join();
  EXPECT_TRUE(loop_.stopping());
}

TEST_P(EventLoopTest, TimerArmedFromAnotherThreadWakesTheLoop) {
  std::atomic<int> fired{0};
  timers::Timer t(rt_, "t", [&](const timers::Timer::Expiry&) { ++fired; });
  std::thread arm([&] { t.arm_after(100us); });
  arm.join();
  spin_until([&] { return fired.load() > 0; });
  EXPECT_EQ(fired.load(), 1);
}

TEST_P(EventLoopTest, FdEventAloneReadsNoClock) {
  Pipe p;
  loop_.watch(p.r, kReadable, FdHandlers{[&] { p.drain(); }, {}, {}});
  p.put();
  const auto passes = dynticks_.stats().passes;
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(dynticks_.stats().passes, passes);
}

// The poll-timeout alarm fires only when a wait times out. Here every wait ends at once on a
// ready fd, as under a client sending requests faster than the timer's period: the timer must
// still run once it is due (it used to be postponed for as long as the events kept coming).
TEST_P(EventLoopTest, ASteadyTrickleOfFdEventsDoesNotPostponeADueTimer) {
  Pipe p;
  loop_.watch(p.r, kReadable, FdHandlers{[&] { p.drain(); }, {}, {}});
  int fired = 0;
  timers::Timer t(rt_, "t", [&](const timers::Timer::Expiry&) { ++fired; });
  t.arm_after(2ms);
  const auto give_up = std::chrono::steady_clock::now() + 1s;
  while (fired == 0 && std::chrono::steady_clock::now() < give_up) {
    p.put();  // ready before the wait: it returns at once, never by timeout
    ASSERT_TRUE(loop_.run_once());
  }
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(loop_.stats().timeouts, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, EventLoopTest,
                         ::testing::Values(PollerKind::kPpoll, PollerKind::kEpoll,
                                           PollerKind::kTimerfdEpoll, PollerKind::kAuto),
                         [](const auto& p) {
                           std::string n(poller_kind_name(p.param));
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace minivmm::loop
