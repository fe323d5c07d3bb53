// AutoPoller: the switching logic against injected per-backend costs (deterministic), then the
// backend contract (readiness, timeouts, hang-up, changes during dispatch, 1024 fds) inside a
// real EventLoop, both with the default options and with a cost source that makes it switch
// backends every other wait.
#include "loop/auto_poller.h"

#include <gtest/gtest.h>

#include "tests/support/test_pipe.h"
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "loop/event_loop.h"
#include "timers/alarm_timer.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer.h"

namespace minivmm::loop {
namespace {

using namespace std::chrono_literals;

using CostFn = std::function<Nanos(PollerKind, std::size_t)>;

struct CostLog {
  std::uint64_t ppoll = 0;
  std::uint64_t epoll = 0;
};

// Costs from a function of (backend, fd count); counts what was measured.
class FakeCost final : public AutoPoller::CostSource {
 public:
  FakeCost(CostFn fn, CostLog* log) : fn_(std::move(fn)), log_(log) {}
  void start() override {}
  Nanos stop(PollerKind measured, std::size_t fds) override {
    if (log_) ++(measured == PollerKind::kPpoll ? log_->ppoll : log_->epoll);
    return fn_(measured, fds);
  }

 private:
  CostFn fn_;
  CostLog* log_;
};

CostFn fixed(Nanos ppoll, Nanos epoll) {
  return [=](PollerKind k, std::size_t) { return k == PollerKind::kPpoll ? ppoll : epoll; };
}

// ppoll linear in the fd count, epoll flat: crossover at 30 fds.
Nanos linear_model(PollerKind k, std::size_t fds) {
  return k == PollerKind::kPpoll ? Nanos{100 + 10 * static_cast<std::int64_t>(fds)} : Nanos{400};
}

struct EventFd {
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ~EventFd() {
    if (fd >= 0) close(fd);
  }
  void signal() const {
    const std::uint64_t one = 1;
    ASSERT_EQ(write(fd, &one, sizeof one), 8);
  }
};

AutoPollerOptions small_options() {
  AutoPollerOptions o;
  o.trial_interval = 64;
  o.max_trial_interval = 512;
  o.trial_waits = 4;
  o.warmup_waits = 0;  // tested on its own
  o.abort_after = 2;
  o.hysteresis = 0.10;
  o.fd_change_min = 8;
  o.decision_log_size = 4;
  o.trial_budget = 1.0;  // out of the way of the interval arithmetic; tested on its own
  o.budget_interval_cap = 512;
  return o;
}

class AutoPolicyTest : public ::testing::Test {
 protected:
  void make(CostFn fn, AutoPollerOptions o = small_options()) {
    poller_ = std::make_unique<AutoPoller>(o, std::make_unique<FakeCost>(std::move(fn), &log_));
    ASSERT_TRUE(poller_->add(always_ready_.fd, kReadable, false));
    always_ready_.signal();  // never read: every wait returns at once
  }
  void spin(int waits) {
    for (int i = 0; i < waits; ++i) ASSERT_EQ(poller_->wait(Nanos{0}, ready_), 1);
  }
  // Idle fds that change only the count (they never become ready).
  void add_idle(int count) {
    for (int i = 0; i < count; ++i) {
      idle_.push_back(std::make_unique<EventFd>());
      ASSERT_TRUE(poller_->add(idle_.back()->fd, kReadable, false));
    }
  }
  void remove_idle(std::size_t keep) {
    while (idle_.size() > keep) {
      poller_->remove(idle_.back()->fd);
      idle_.pop_back();
    }
  }

  CostLog log_;
  EventFd always_ready_;
  std::vector<std::unique_ptr<EventFd>> idle_;
  std::unique_ptr<AutoPoller> poller_;
  std::vector<PollEvent> ready_;
};

TEST_F(AutoPolicyTest, StartsOnPpollAndMeasuresNothingBetweenTrials) {
  make(fixed(100ns, 200ns));
  EXPECT_EQ(poller_->kind(), PollerKind::kAuto);
  EXPECT_EQ(poller_->active_kind(), PollerKind::kPpoll);
  spin(63);  // just before the first trial
  EXPECT_EQ(poller_->stats().measured_waits, 0u);
  EXPECT_EQ(log_.ppoll + log_.epoll, 0u);
  EXPECT_EQ(poller_->stats().ppoll_cost, 0ns);
  spin(1);
  EXPECT_EQ(poller_->stats().measured_waits, 1u);
}

TEST_F(AutoPolicyTest, TheFirstWaitOfEachWindowIsAWarmUpAndNotCounted) {
  AutoPollerOptions o = small_options();
  o.warmup_waits = 1;
  // The first wait measured on a backend after a change runs cold: 50x its warm cost. Counted,
  // it would abort the trial (and bias the reference).
  auto prev = std::make_shared<std::optional<PollerKind>>();
  make([prev](PollerKind k, std::size_t) {
    const bool cold = *prev != k;
    *prev = k;
    const Nanos warm = k == PollerKind::kPpoll ? 300ns : 200ns;
    return cold ? warm * 50 : warm;
  }, o);
  spin(64 + 5 + 5);
  ASSERT_EQ(poller_->decisions().size(), 1u);
  const AutoDecision& d = poller_->decisions().back();
  EXPECT_EQ(d.reason, AutoReason::kOtherCheaper);
  EXPECT_EQ(d.from_cost, 300ns);
  EXPECT_EQ(d.to_cost, 200ns);
  EXPECT_EQ(poller_->stats().measured_waits, 10u);
}

TEST_F(AutoPolicyTest, SwitchesWhenTheOtherIsCheaperByMoreThanTheMargin) {
  make(fixed(300ns, 200ns));
  spin(64 + 4 + 4);  // interval, reference window, trial window
  ASSERT_EQ(poller_->decisions().size(), 1u);
  const AutoDecision& d = poller_->decisions().back();
  EXPECT_EQ(d.from, PollerKind::kPpoll);
  EXPECT_EQ(d.to, PollerKind::kEpoll);
  EXPECT_EQ(d.from_cost, 300ns);
  EXPECT_EQ(d.to_cost, 200ns);
  EXPECT_EQ(d.reason, AutoReason::kOtherCheaper);
  EXPECT_EQ(d.trigger, AutoTrigger::kSchedule);
  EXPECT_EQ(d.wait_index, 71u);  // trial window: waits 68..71
  EXPECT_EQ(d.fds, 1u);
  EXPECT_EQ(poller_->active_kind(), PollerKind::kEpoll);
  const AutoPollerStats s = poller_->stats();
  EXPECT_EQ(s.switches, 1u);
  EXPECT_EQ(s.samples, 1u);
  EXPECT_EQ(s.active, PollerKind::kEpoll);
  EXPECT_EQ(s.epoll_cost, 200ns);
  EXPECT_EQ(s.trial_interval, 64u);  // a switch is confirmed soon
  EXPECT_EQ(log_.epoll, 4u);
}

TEST_F(AutoPolicyTest, KeepsWithinTheHysteresisMarginAndBacksOff) {
  make(fixed(100ns, 95ns));  // 5% cheaper: below the 10% margin
  spin(64 + 8);
  ASSERT_EQ(poller_->decisions().size(), 1u);
  EXPECT_EQ(poller_->decisions().back().reason, AutoReason::kWithinMargin);
  EXPECT_EQ(poller_->active_kind(), PollerKind::kPpoll);
  EXPECT_EQ(poller_->stats().trial_interval, 128u);
  spin(128 + 8);
  EXPECT_EQ(poller_->stats().samples, 2u);
  EXPECT_EQ(poller_->stats().trial_interval, 256u);
  spin(256 + 8 + 512 + 8 + 512 + 8);
  EXPECT_EQ(poller_->stats().trial_interval, 512u);  // the ceiling
  EXPECT_EQ(poller_->stats().samples, 5u);
  EXPECT_EQ(poller_->stats().switches, 0u);
}

TEST_F(AutoPolicyTest, KeepsWhenTheCurrentIsCheaper) {
  make(fixed(100ns, 150ns));
  spin(64 + 8);
  ASSERT_EQ(poller_->decisions().size(), 1u);
  EXPECT_EQ(poller_->decisions().back().reason, AutoReason::kCurrentCheaper);
  EXPECT_EQ(poller_->active_kind(), PollerKind::kPpoll);
}

TEST_F(AutoPolicyTest, AbortsATrialTheOtherIsClearlyLosing) {
  make(fixed(100ns, 1000ns));
  spin(64 + 4 + 2);  // abort_after = 2 waits of the trial
  ASSERT_EQ(poller_->decisions().size(), 1u);
  EXPECT_EQ(poller_->decisions().back().reason, AutoReason::kTrialAborted);
  EXPECT_EQ(poller_->stats().aborted_trials, 1u);
  EXPECT_EQ(log_.epoll, 2u);
}

TEST_F(AutoPolicyTest, AnExpensiveTrialIsSpacedOutToStayWithinItsBudget) {
  AutoPollerOptions o = small_options();
  o.trial_budget = 0.01;
  o.budget_interval_cap = 1u << 20;
  make(fixed(100ns, 1000ns), o);
  spin(64 + 4 + 2);
  ASSERT_EQ(poller_->stats().aborted_trials, 1u);
  // 2 waits at 900 ns extra = 1800 ns, which must be 1% of the next interval's waits at 100 ns.
  EXPECT_EQ(poller_->stats().trial_interval, 1800u);
}

TEST_F(AutoPolicyTest, SwitchesBackAndForthAsTheFdCountCrossesOver) {
  make(linear_model);
  spin(150);  // one trial (aborted at wait 69), the next due at 197
  EXPECT_EQ(poller_->active_kind(), PollerKind::kPpoll);  // 1 fd: 110 ns vs 400 ns

  add_idle(99);  // 100 fds: 1100 ns vs 400 ns
  spin(4 + 4 + 4);  // a few waits of delay, then the windows: no backed-off interval
  EXPECT_EQ(poller_->active_kind(), PollerKind::kEpoll);
  EXPECT_EQ(poller_->decisions().back().trigger, AutoTrigger::kFdCountChange);
  EXPECT_EQ(poller_->decisions().back().fds, 100u);

  remove_idle(0);  // back to 1 fd
  spin(4 + 4 + 4);
  EXPECT_EQ(poller_->active_kind(), PollerKind::kPpoll);
  EXPECT_EQ(poller_->decisions().back().reason, AutoReason::kOtherCheaper);
  EXPECT_EQ(poller_->stats().switches, 2u);
}

TEST_F(AutoPolicyTest, SmallFdCountChangesDoNotTriggerATrial) {
  make(linear_model);
  spin(150);  // between trials
  const auto samples = poller_->stats().samples;
  add_idle(4);  // below fd_change_min
  spin(20);
  EXPECT_EQ(poller_->stats().samples, samples);
}

TEST_F(AutoPolicyTest, TheDecisionLogIsBounded) {
  make(fixed(100ns, 150ns));
  spin(64 + 8 + 128 + 8 + 256 + 8 + 512 + 8 + 512 + 8 + 512 + 8);
  EXPECT_EQ(poller_->stats().decisions, 6u);
  EXPECT_EQ(poller_->decisions().size(), 4u);  // decision_log_size
  // Decisions at waits 71, 206, 469, 988, 1507, 2026 (intervals 128, 256, 512, 512, 512).
  EXPECT_EQ(poller_->decisions().front().wait_index, 469u);
}

TEST_F(AutoPolicyTest, RejectsOptionsOutOfRange) {
  AutoPollerOptions o;
  o.trial_waits = 0;
  EXPECT_THROW(AutoPoller{o}, std::invalid_argument);
  o = AutoPollerOptions{};
  o.hysteresis = 1.0;
  EXPECT_THROW(AutoPoller{o}, std::invalid_argument);
}

TEST_F(AutoPolicyTest, AFailedAddLeavesNeitherBackendWithTheFd) {
  make(fixed(100ns, 100ns));
  EXPECT_FALSE(poller_->add(always_ready_.fd, kReadable, false));  // already there
  const int regular = memfd_create("regular", MFD_CLOEXEC);  // epoll refuses regular files
  ASSERT_GE(regular, 0);
  EXPECT_FALSE(poller_->add(regular, kReadable, false));
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(poller_->size(), 1u);
  close(regular);
}

TEST(AutoPollerRealCost, MeasuresNonZeroCostsAndMakesADecision) {
  AutoPollerOptions o;
  o.trial_interval = 64;
  AutoPoller poller(o);
  EventFd ready_fd;
  ASSERT_TRUE(poller.add(ready_fd.fd, kReadable, false));
  ready_fd.signal();
  std::vector<PollEvent> ready;
  for (int i = 0; i < 200; ++i) ASSERT_EQ(poller.wait(Nanos{0}, ready), 1);
  ASSERT_GE(poller.stats().decisions, 1u);
  EXPECT_GT(poller.stats().ppoll_cost, 0ns);
  EXPECT_GT(poller.stats().epoll_cost, 0ns);
}

// ---- The backend contract, inside a real EventLoop. ----

// Every trial is won by the other backend: the active backend changes every other wait.
class FlipFlopCost final : public AutoPoller::CostSource {
 public:
  void start() override {}
  Nanos stop(PollerKind measured, std::size_t) override {
    const bool trial = has_prev_ && measured != prev_;
    prev_ = measured;
    has_prev_ = true;
    return trial ? 1ns : 1000ns;
  }

 private:
  PollerKind prev_ = PollerKind::kPpoll;
  bool has_prev_ = false;
};

enum class Mode { kDefault, kFlipFlop };

std::unique_ptr<Poller> make_auto(Mode mode) {
  if (mode == Mode::kDefault) return make_poller(PollerKind::kAuto);
  AutoPollerOptions o;
  o.trial_interval = 1;
  o.max_trial_interval = 1;
  o.trial_waits = 1;
  o.warmup_waits = 0;
  o.abort_after = 1;
  o.fd_change_min = std::size_t{1} << 30;
  return std::make_unique<AutoPoller>(o, std::make_unique<FlipFlopCost>());
}

using Pipe = testing::TestPipe;

class AutoContractTest : public ::testing::TestWithParam<Mode> {
 protected:
  timers::MonotonicClock clock_;
  timers::TimerList rt_{timers::ClockType::kRt, clock_};
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, clock_, {&rt_}};
  EventLoop loop_{make_auto(GetParam()), dynticks_};

  AutoPoller& poller() { return static_cast<AutoPoller&>(loop_.poller()); }
  void spin_until(const std::function<bool()>& done, int max = 100) {
    for (int i = 0; i < max && !done(); ++i) ASSERT_TRUE(loop_.run_once());
  }
  void TearDown() override {
    if (GetParam() == Mode::kFlipFlop && poller().stats().waits >= 4) {
      EXPECT_GE(poller().stats().switches, 1u) << "the flip-flop cost should switch backends";
    }
  }
};

TEST_P(AutoContractTest, ReadableFdRunsItsCallbackOnEitherBackend) {
  Pipe p;
  int calls = 0;
  loop_.watch(p.r, kReadable, FdHandlers{[&] { ++calls; p.drain(); }, {}, {}});
  for (int i = 1; i <= 8; ++i) {
    p.put();
    ASSERT_TRUE(loop_.run_once());
    EXPECT_EQ(calls, i);
  }
}

TEST_P(AutoContractTest, WritableFdRunsItsCallback) {
  Pipe p;
  int calls = 0;
  loop_.watch(p.w, kWritable, FdHandlers{{}, [&] { ++calls; }, {}});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(calls, 4);
}

TEST_P(AutoContractTest, HangupIsReported) {
  Pipe p;
  int hangups = 0;
  loop_.watch(p.r, kReadable, FdHandlers{[] {}, {}, [&] {
                ++hangups;
                loop_.unwatch(p.r);
              }});
  for (int i = 0; i < 3; ++i) {
    loop_.schedule([] {});
    ASSERT_TRUE(loop_.run_once());
  }
  close(p.w);
  p.w = -1;
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(hangups, 1);
}

TEST_P(AutoContractTest, TimeoutHasNanosecondResolutionAndNeverFiresEarly) {
  for (int round = 0; round < 4; ++round) {  // on alternating backends in flip-flop mode
    int fired = 0;
    timers::Nanos fired_at{0};
    timers::Timer t(rt_, "t", [&](const timers::Timer::Expiry& e) {
      ++fired;
      fired_at = e.now;
    });
    const timers::Nanos deadline = clock_.now() + 200'123ns;
    t.arm_at(deadline);
    spin_until([&] { return fired > 0; });
    ASSERT_EQ(fired, 1);
    EXPECT_GE(fired_at, deadline);
  }
  EXPECT_EQ(dynticks_.stats().false_wakeups, 0u);
}

TEST_P(AutoContractTest, RemovalDuringDispatchSkipsTheRemovedFd) {
  Pipe a, b;
  int a_calls = 0, b_calls = 0;
  auto handlers = [&](int& calls, Pipe& self, Pipe& other) {
    return FdHandlers{[&] { ++calls; self.drain(); loop_.unwatch(other.r); }, {}, {}};
  };
  loop_.watch(a.r, kReadable, handlers(a_calls, a, b));
  loop_.watch(b.r, kReadable, handlers(b_calls, b, a));
  a.put();
  b.put();
  ASSERT_TRUE(loop_.run_once());
  EXPECT_EQ(a_calls + b_calls, 1);
}

TEST_P(AutoContractTest, FdsAddedAndRemovedWhileRunningAreSeenByBothBackends) {
  Pipe a, b;
  int a_calls = 0, b_calls = 0;
  loop_.watch(a.r, kReadable, FdHandlers{[&] {
                ++a_calls;
                a.drain();
                loop_.watch(b.r, kReadable, FdHandlers{[&] { ++b_calls; b.drain(); }, {}, {}});
              }, {}, {}});
  a.put();
  ASSERT_TRUE(loop_.run_once());
  for (int i = 1; i <= 4; ++i) {  // b, registered from a callback, on both backends
    b.put();
    ASSERT_TRUE(loop_.run_once());
    EXPECT_EQ(b_calls, i);
  }
  loop_.unwatch(b.r);
  b.put();
  for (int i = 0; i < 4; ++i) {  // unwatched: neither backend reports it any more
    loop_.schedule([] {});
    ASSERT_TRUE(loop_.run_once());
  }
  EXPECT_EQ(b_calls, 4);
  EXPECT_EQ(a_calls, 1);
}

TEST_P(AutoContractTest, ThousandFdsOnlyTheReadyOneRuns) {
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
  for (int k : {777, 3, 1023, 512}) {
    ASSERT_EQ(write(fds[static_cast<std::size_t>(k)], &one, sizeof one), 8);
    ASSERT_TRUE(loop_.run_once());
  }
  for (int i = 0; i < 1024; ++i) {
    const bool expected = i == 777 || i == 3 || i == 1023 || i == 512;
    EXPECT_EQ(calls[static_cast<std::size_t>(i)], expected ? 1 : 0) << i;
  }
  for (int fd : fds) {
    loop_.unwatch(fd);
    close(fd);
  }
  EXPECT_EQ(loop_.poller().size(), 1u);
}

TEST_P(AutoContractTest, WakeFromAnotherThreadEndsABlockingWait) {
  for (int i = 0; i < 3; ++i) {
    std::thread t([&] { loop_.wake(); });
    ASSERT_TRUE(loop_.run_once());  // no timer, no fd: only the wake can end this wait
    t.join();
  }
  EXPECT_EQ(loop_.stats().wake_events, 3u);
}

TEST_P(AutoContractTest, TimerArmedFromAnotherThreadWakesTheLoop) {
  std::atomic<int> fired{0};
  timers::Timer t(rt_, "t", [&](const timers::Timer::Expiry&) { ++fired; });
  std::thread arm([&] { t.arm_after(100us); });
  arm.join();
  spin_until([&] { return fired.load() > 0; });
  EXPECT_EQ(fired.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Auto, AutoContractTest, ::testing::Values(Mode::kDefault, Mode::kFlipFlop),
                         [](const auto& p) {
                           return p.param == Mode::kDefault ? "Default" : "FlipFlop";
                         });

// A timerfd alarm is level-triggered under auto (edge_supported() is false), so the loop reads
// it on each expiry: a periodic timer must not turn the loop into a busy loop on either backend.
TEST(AutoPollerAlarm, TimerfdAlarmIsConsumedOnEveryBackend) {
  timers::MonotonicClock clock;
  timers::TimerList rt{timers::ClockType::kRt, clock};
  auto alarm = timers::make_alarm_timer(timers::AlarmKind::kTimerfd, timers::AlarmOptions{});
  timers::Dynticks dynticks{*alarm, clock, {&rt}};
  EventLoop loop{make_auto(Mode::kFlipFlop), dynticks};
  int fired = 0;
  timers::Timer t(rt, "tick", [&](const timers::Timer::Expiry&) { ++fired; });
  t.arm_periodic(clock.now() + 500us, 500us);
  int iterations = 0;
  for (; iterations < 400 && fired < 10; ++iterations) ASSERT_TRUE(loop.run_once());
  EXPECT_EQ(fired, 10);
  EXPECT_LE(iterations, 40);  // about one wait per expiry, not a spin
  EXPECT_GE(static_cast<AutoPoller&>(loop.poller()).stats().switches, 1u);
}

}  // namespace
}  // namespace minivmm::loop
