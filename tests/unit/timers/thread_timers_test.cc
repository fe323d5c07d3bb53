// ThreadTimers on a real hosting thread. The thread blocks in ppoll() with the timer signal
// unblocked only inside the call, which is what KVM_RUN does with KVM_SET_SIGNAL_MASK, so these
// tests exercise the vCPU protocol without KVM: the expiry surfaces as EINTR, after_interrupted()
// takes the signal and runs the timer. One difference is bridged: ppoll delivers the signal it
// unblocked before returning, where KVM restores the thread's mask first and leaves it pending;
// a handler that re-queues the signal to its thread gives ppoll KVM's behaviour.
#include "timers/thread_timers.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "timers/monotonic_clock.h"
#include "timers/syscall_counters.h"
#include "timers/timer.h"

namespace minivmm::timers {
namespace {

using namespace std::chrono_literals;

// Interrupts the host's blocking call, like a vCPU kick: a signal with an empty handler.
int kick_signal() { return SIGRTMIN + 7; }

// A thread that hosts `timers` the way a vCPU thread does, until stop().
class Host {
 public:
  explicit Host(ThreadTimers& timers) : timers_(timers) {
    static const bool installed = [] {
      struct sigaction sa {};
      sa.sa_handler = [](int) {};
      sigemptyset(&sa.sa_mask);
      sigaction(kick_signal(), &sa, nullptr);
      // Runs with the signal blocked; re-queued, it stays pending once the handler returns to
      // the thread's own mask, which blocks it.
      sa.sa_handler = [](int sig) { raise(sig); };
      sigaction(ThreadTimers::signal_number(), &sa, nullptr);
      return true;
    }();
    (void)installed;
    timers_.set_wake([this] { kick(); });
  }
  ~Host() { stop(); }

  // Starts the thread; `setup` runs on it after attach() (e.g. to arm a timer from there).
  void start(std::function<void()> setup = {}) {
    thread_ = std::thread([this, setup = std::move(setup)] { main(setup); });
    while (!ready_.load()) std::this_thread::yield();
  }
  void stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    kick();
    thread_.join();
  }
  void kick() {
    kicked_ = true;
    if (ready_) pthread_kill(thread_.native_handle(), kick_signal());
  }
  // Runs `fn` on the hosting thread and waits for it.
  void run_on(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      job_ = std::move(fn);
    }
    kick();
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (!job_) return;
      }
      std::this_thread::yield();
    }
  }
  bool failed() const { return failed_; }
  std::uint64_t wait_calls() const { return waits_; }

 private:
  void main(const std::function<void()>& setup) {
    set_thread_syscalls(vcpu_syscalls());
    timers_.attach();
    if (setup) setup();
    sigset_t outside;  // attach() blocked the timer signal; kicks too, so none is lost
    pthread_sigmask(SIG_BLOCK, nullptr, &outside);
    sigaddset(&outside, kick_signal());
    pthread_sigmask(SIG_SETMASK, &outside, nullptr);
    sigset_t inside = outside;  // the mask "KVM_RUN" runs with: both deliverable
    sigdelset(&inside, ThreadTimers::signal_number());
    sigdelset(&inside, kick_signal());
    ready_ = true;
    while (!stop_) {
      {
        std::lock_guard lock(mu_);
        if (job_) {
          job_();
          job_ = nullptr;
        }
      }
      if (!timers_.before_wait()) {
        failed_ = true;
        break;
      }
      if (kicked_.exchange(false)) {
        // A kick that came between loops: handled now, as immediate_exit does for KVM_RUN.
        if (!timers_.after_interrupted()) failed_ = true;
        continue;
      }
      ++waits_;
      const timespec forever{3600, 0};
      if (ppoll(nullptr, 0, &forever, &inside) < 0 && errno == EINTR) {
        kicked_ = false;
        if (!timers_.after_interrupted()) {
          failed_ = true;
          break;
        }
      }
    }
    timers_.suspend();
  }

  ThreadTimers& timers_;
  std::thread thread_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> kicked_{false};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> waits_{0};
  std::mutex mu_;
  std::function<void()> job_;
};

template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit = 2000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(200us);
  }
  return true;
}

struct ThreadTimersFixture {
  MonotonicClock clock;
  TimerList list{ClockType::kRt, clock};
  ThreadTimers timers{clock, {&list}, DynticksOptions{20us}};
};

TEST(ThreadTimersTest, OneShotArmedOnTheHostThreadFiresOnceAndNotEarly) {
  ThreadTimersFixture f;
  std::atomic<int> fired{0};
  std::atomic<std::int64_t> seen{0};
  Timer t(f.list, "t", [&](const Timer::Expiry& e) {
    seen = e.now.count();
    ++fired;
  });
  Host host(f.timers);
  Nanos deadline{0};
  host.start([&] {
    deadline = f.clock.now() + 2ms;
    t.arm_at(deadline);
  });
  ASSERT_TRUE(wait_until([&] { return fired.load() == 1; }));
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(fired.load(), 1);
  EXPECT_GE(seen.load(), deadline.count());
  host.stop();
  EXPECT_FALSE(host.failed());
  const auto s = f.timers.stats();
  EXPECT_EQ(s.signals_taken, 1u);
  EXPECT_EQ(s.passes.timers_run, 1u);
  EXPECT_EQ(s.passes.false_wakeups, 0u);
}

TEST(ThreadTimersTest, PeriodicTimerArmsTheHostTimerOnce) {
  // The periodic fast path on the hosting thread: the kernel repeats the POSIX timer, so a
  // steady tick costs no timer_settime at all after the first.
  ThreadTimersFixture f;
  std::atomic<int> fired{0};
  Timer t(f.list, "tick", [&](const Timer::Expiry&) { ++fired; });
  Host host(f.timers);
  host.start([&] { t.arm_periodic(f.clock.now() + 2ms, 2ms); });
  ASSERT_TRUE(wait_until([&] { return fired.load() >= 40; }));
  host.stop();
  EXPECT_FALSE(host.failed());
  const auto s = f.timers.stats();
  // One arm, plus one to leave and one to rejoin the grid each time a pass runs so late that
  // the next tick is already due (clamped: on a loaded host, ASan at ctest -j3 beside KVM
  // tests, that was every other tick). Every other pass skips the arm; the fast path off would
  // arm once per tick with nothing clamped.
  EXPECT_LE(s.passes.arms, 1 + 2 * s.passes.clamped)
      << "a rearm per tick: the fast path is off (" << s.passes.arms << " arms, "
      << s.passes.clamped << " clamped, " << s.passes.timers_run << " run)";
  // None on a quiet host. One was seen under TSan on a loaded one (CI), its cause not
  // established: Linux 6.13+ drops a timer signal that a later timer_settime made stale, so it
  // is not a one-shot's leftover. Allowed only beside clamped passes.
  EXPECT_LE(s.passes.false_wakeups, s.passes.clamped)
      << s.passes.false_wakeups << " false wakeups, " << s.passes.clamped << " clamped";
  EXPECT_GE(s.signals_taken, s.passes.timers_run / 2);
}

TEST(ThreadTimersTest, ArmFromAnotherThreadWakesTheHostInTime) {
  ThreadTimersFixture f;
  std::atomic<int> fired{0};
  Timer far(f.list, "far", [](const Timer::Expiry&) {});
  Timer near(f.list, "near", [&](const Timer::Expiry&) { ++fired; });
  Host host(f.timers);
  host.start([&] { far.arm_after(10s); });
  // The host sleeps for `far`; an arm from this thread must wake it (a vCPU kick).
  const auto armed_at = f.clock.now();
  near.arm_after(3ms);
  ASSERT_TRUE(wait_until([&] { return fired.load() == 1; }));
  EXPECT_LT(f.clock.now() - armed_at, 1s);
  host.stop();
  EXPECT_FALSE(host.failed());
  EXPECT_GE(f.timers.stats().passes.cross_thread_wakes, 1u);
}

TEST(ThreadTimersTest, AKickIsNotAFalseWakeup) {
  ThreadTimersFixture f;
  Timer far(f.list, "far", [](const Timer::Expiry&) {});
  Host host(f.timers);
  host.start([&] { far.arm_after(10s); });
  const auto before = f.timers.stats().interruptions;
  host.kick();
  ASSERT_TRUE(wait_until([&] { return f.timers.stats().interruptions > before; }));
  host.stop();
  const auto s = f.timers.stats();
  EXPECT_EQ(s.signals_taken, 0u);
  EXPECT_EQ(s.passes.false_wakeups, 0u);
  EXPECT_EQ(s.passes.timers_run, 0u);
}

TEST(ThreadTimersTest, SuspendedTimersDoNotInterruptAndRunOnResume) {
  ThreadTimersFixture f;
  std::atomic<int> fired{0};
  Timer t(f.list, "t", [&](const Timer::Expiry&) { ++fired; });
  Host host(f.timers);
  host.start();
  // Armed in one job: the host's next before_wait() programs the POSIX timer...
  // The deadline is far enough that the park comes before it even on a loaded TSan host (at
  // 40 ms, CI's host once ran the second job after it, and the timer fired before the park).
  constexpr auto kDeadline = 500ms;
  const auto armed_at = std::chrono::steady_clock::now();
  host.run_on([&] { t.arm_after(kDeadline); });
  // ...which the next job, a park, disarms.
  host.run_on([&] { ASSERT_TRUE(f.timers.suspend()); });
  ASSERT_LT(std::chrono::steady_clock::now() - armed_at, kDeadline)
      << "the park came after the deadline: the host was too slow for this test to mean anything";
  const auto at_park = f.timers.stats();
  EXPECT_GE(at_park.passes.arms, 1u) << "the timer was never armed: nothing to disarm";
  EXPECT_GE(at_park.passes.disarms, 1u);
  // Parked past the deadline: a timer still armed would interrupt the host with its signal.
  std::this_thread::sleep_until(armed_at + kDeadline + 50ms);
  EXPECT_EQ(fired.load(), 0);
  EXPECT_EQ(f.timers.stats().signals_taken, 0u) << "the timer fired while suspended";
  host.run_on([&] { ASSERT_TRUE(f.timers.resume()); });  // overdue: runs at once
  ASSERT_TRUE(wait_until([&] { return fired.load() == 1; }));
  host.stop();
  EXPECT_FALSE(host.failed());
}

TEST(ThreadTimersTest, AlarmUnattachedRefusesToArm) {
  ThreadSignalAlarm alarm;
  EXPECT_FALSE(alarm.arm(Nanos{1'000'000}, Nanos{0}));
  EXPECT_TRUE(alarm.disarm());
}

}  // namespace
}  // namespace minivmm::timers
