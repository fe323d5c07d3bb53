// Dynticks: runs the expired timers of every clock, then touches the host alarm once — and not
// at all when the earliest deadline did not move. This is the 2008 QEMU "reduce redundant timer
// rearming" fix (rearm after *both* clock queues ran) plus the 2004 Linux "cache the nearest
// expiry" idea: the armed deadline is cached here, so nothing ever asks the kernel
// (old QEMU's timer_gettime) what is armed.
//
// Threads: run_timers()/rearm()/deadline()/poll_timeout()/stats() on the owning thread only: the
// loop thread that constructed it, or a thread that adopted it (a vCPU thread hosting its own
// timers, ThreadTimers).
// The head-changed hook it installs on each TimerList may run on any thread: from a vCPU thread
// it wakes the loop (the arm moved that list's earliest deadline earlier); from the loop thread
// it only marks the cached deadline stale, to be recomputed before the loop waits again.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "timers/alarm_timer.h"
#include "timers/clock.h"
#include "timers/timer_list.h"

namespace minivmm::timers {

struct DynticksOptions {
  // Deadlines closer than this are pushed out to it (old QEMU's MIN_TIMER_REARM_NS was 250 us):
  // arming for "now" would spin, and a zero timerfd value disarms.
  Nanos min_delta{20'000};
};

struct DynticksStats {
  std::uint64_t passes = 0;         // run_timers() calls
  std::uint64_t clock_reads = 0;    // host clock reads made by Dynticks itself
  std::uint64_t timers_run = 0;
  std::uint64_t arms = 0;           // host alarm (re)arms issued (a syscall each, if it has an fd)
  std::uint64_t arms_skipped = 0;   // deadline unchanged, or already on the armed periodic grid
  std::uint64_t disarms = 0;
  std::uint64_t clamped = 0;        // deadlines pushed out to min_delta
  std::uint64_t alarm_wakeups = 0;  // passes triggered by the alarm firing
  std::uint64_t false_wakeups = 0;  // ...that came before anything was due (nothing ran)
  std::uint64_t cancelled_wakeups = 0;  // ...for a timer cancelled or moved after the arm
  std::uint64_t late_ns_total = 0;  // how late the alarm passes ran after the armed deadline
  std::uint64_t late_ns_max = 0;
  std::uint64_t alarm_failures = 0;
  std::uint64_t cross_thread_wakes = 0;  // arms from other threads that had to wake the loop
  std::uint64_t cross_thread_arms_absorbed = 0;  // ...that did not: the loop wakes in time
};

class Dynticks {
 public:
  // Construct on the loop thread. `monotonic` is the clock every list's clock is derived from.
  Dynticks(AlarmTimer& alarm, const Clock& monotonic, std::vector<TimerList*> lists,
           DynticksOptions options = {});
  Dynticks(const Dynticks&) = delete;
  Dynticks& operator=(const Dynticks&) = delete;

  // How a vCPU-thread arm that moved a list head reaches the loop (EventLoop::wake).
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }

  // One pass: read the clock once, run every expired timer of every clock, compute the merged
  // deadline once, touch the alarm at most once. `alarm_fired` says the alarm woke the loop (for
  // false-wakeup and lateness accounting). Returns false if the host alarm failed (errno set).
  bool run_timers(bool alarm_fired);

  // Recompute and re-arm without running timers: after pause/resume or a loop-thread arm.
  bool rearm();

  // Disarms the host alarm and forgets what was armed, until the next rearm()/run_timers():
  // for a thread that stops waiting for its timers for a while (a parked vCPU). A cross-thread
  // arm meanwhile wakes the thread (the published deadline is "none").
  bool suspend();

  // Makes the calling thread the owner: its arms only mark the deadline stale, other threads'
  // arms wake it. For a Dynticks built on one thread and run on another (ThreadTimers).
  void adopt_current_thread() noexcept;

  // A loop-thread arm moved a list head since the last computation.
  bool stale() const noexcept { return stale_.load(std::memory_order_relaxed); }

  // The armed host deadline (CLOCK_MONOTONIC), no syscall and no clock read; nullopt: none.
  std::optional<Nanos> deadline() const noexcept { return armed_ ? std::optional(target_) : std::nullopt; }
  // deadline() relative to the last clock reading: the poll timeout for the poll-timeout alarm.
  std::optional<Nanos> poll_timeout() const noexcept;
  // Reads the clock (the next poll_timeout() counts from it) and says whether the armed deadline
  // has passed. For the poll-timeout alarm after a wait that fd events ended early: without the
  // reading, every such wait would sleep the whole timeout again from the stale one, and a
  // steady trickle of events would postpone the timers forever.
  bool deadline_passed() noexcept;

  AlarmTimer& alarm() noexcept { return alarm_; }
  DynticksStats stats() const noexcept {
    DynticksStats s = stats_;
    s.cross_thread_wakes = woken_.load(std::memory_order_relaxed);
    s.cross_thread_arms_absorbed = absorbed_.load(std::memory_order_relaxed);
    return s;
  }
  Nanos last_now() const noexcept { return now_; }

 private:
  void on_head_changed(const TimerList& list, Nanos deadline, Nanos slack);
  void publish(std::int64_t value) noexcept { published_ns_.store(value, std::memory_order_seq_cst); }
  bool update_alarm();

  AlarmTimer& alarm_;
  const Clock& monotonic_;
  const std::vector<TimerList*> lists_;
  const DynticksOptions options_;
  std::atomic<std::thread::id> owner_;  // the thread that runs passes
  std::function<void()> wake_;

  std::atomic<bool> stale_{false};
  // The host deadline the loop will wake at, for other threads' arms to compare against:
  // kPublishedNone when none, kPublishedComputing while update_alarm() reads the lists. The
  // loop publishes "computing" before reading the lists and an arming thread inserts before
  // reading this, so (seq_cst) either the loop sees the new timer or the arming thread sees a
  // value that makes it wake the loop.
  static constexpr std::int64_t kPublishedNone = INT64_MAX;
  static constexpr std::int64_t kPublishedComputing = INT64_MIN;
  std::atomic<std::int64_t> published_ns_{kPublishedNone};
  Nanos now_{0};           // the last host clock reading
  bool armed_ = false;     // the alarm is armed for target_ (ppoll: the timeout is valid)
  Nanos target_{0};        // next host instant the alarm fires
  Nanos interval_{0};      // the armed host timer's period (0: one-shot)
  DynticksStats stats_;
  std::atomic<std::uint64_t> woken_{0};     // -> stats_.cross_thread_wakes
  std::atomic<std::uint64_t> absorbed_{0};  // -> stats_.cross_thread_arms_absorbed
};

}  // namespace minivmm::timers
