// Timers run by a thread that sleeps in a blocking call rather than in an event loop: a vCPU
// thread in KVM_RUN. Why: a guest timer interrupt must wake the vCPU thread anyway. When the
// loop thread takes the PIT's expiry, every tick wakes two threads (the loop, which injects,
// then the vCPU); when the vCPU thread takes it itself — its POSIX timer's signal makes KVM_RUN
// return EINTR, it runs the timer, which raises IRQ0, and re-enters KVM_RUN — a tick wakes one.
// The pass is the loop's Dynticks pass: one clock read, every expired timer, at most one host
// arm and none at all on the periodic fast path.
//
// The hosting thread's protocol:
//   attach()              once, first thing on the thread
//   before_wait()         before each blocking call: applies the arms made since (its own, and
//                         other threads' that woke it); whatever makes the call return at
//                         once if a wake comes later (immediate_exit) must be reset before
//   <blocking call, with signal_number() unblocked only inside it>
//   after_interrupted()   when the call returned EINTR: takes the signal, runs what is due
//   suspend() / resume()  around a stretch of not waiting for timers (a parked vCPU)
// Another thread's arm that moves a deadline earlier calls the wake function (a vCPU kick).
//
// Threads: the protocol calls on the hosting thread; stats() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "timers/dynticks.h"
#include "timers/thread_signal_alarm.h"

namespace minivmm::timers {

struct ThreadTimersStats {
  DynticksStats passes;             // the Dynticks counters, as of the last protocol call
  std::uint64_t interruptions = 0;  // after_interrupted() calls
  std::uint64_t signals_taken = 0;  // ...that found the timer's signal (the rest were kicks),
                                    // suspended or not
};

class ThreadTimers {
 public:
  ThreadTimers(const Clock& monotonic, std::vector<TimerList*> lists,
               DynticksOptions options = {});
  ThreadTimers(const ThreadTimers&) = delete;
  ThreadTimers& operator=(const ThreadTimers&) = delete;

  // Before the hosting thread starts: how another thread's arm interrupts its blocking call.
  // The arm is also remembered, and the next before_wait() recomputes the deadline: a wake
  // that lands while the host is between two blocking calls must not be lost.
  void set_wake(std::function<void()> wake);

  // On the hosting thread, before its first blocking call: aims the alarm at it, blocks the
  // signal there, takes over the timer passes and arms for what is pending.
  // Throws std::system_error when the host refuses.
  void attach();

  // The calls below return false on a host failure (errno set); the thread should stop.
  bool before_wait();
  bool after_interrupted();
  bool suspend();
  bool resume();

  static int signal_number() noexcept { return ThreadSignalAlarm::signal_number(); }

  ThreadTimersStats stats() const;

 private:
  void publish();

  ThreadSignalAlarm alarm_;
  Dynticks dynticks_;
  bool suspended_ = false;  // between suspend() and resume(): no pass runs, nothing is armed
  std::atomic<bool> woken_{false};  // another thread's arm moved a deadline earlier
  std::uint64_t interruptions_ = 0;
  std::uint64_t signals_taken_ = 0;

  mutable std::mutex stats_mu_;  // a leaf lock, taken once per pass
  ThreadTimersStats published_;  // guarded by stats_mu_
};

}  // namespace minivmm::timers
