// The pending timers of one clock, ordered by deadline; equal deadlines fire in arm order
// (libuv's start_id). A handful of device timers live here, so a sorted vector beats a heap.
//
// Threads: Timer::arm*/cancel from any thread (a vCPU thread reprogramming the PIT);
// run_expired()/next_deadline() from the loop thread only. The list mutex is never held while a
// callback runs (QEMU timerlist_run_timers), so a callback may arm or cancel any timer.
// Lock order: device mutex -> TimerList::mu_.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "timers/clock.h"

namespace minivmm::timers {

class Timer;

enum class ClockType { kVm, kRt };

std::string_view clock_type_name(ClockType type) noexcept;

class TimerList {
 public:
  TimerList(ClockType type, const Clock& clock) : type_(type), clock_(clock) {}
  TimerList(const TimerList&) = delete;
  TimerList& operator=(const TimerList&) = delete;
  ~TimerList();

  ClockType type() const noexcept { return type_; }
  const Clock& clock() const noexcept { return clock_; }

  // Called, without the list lock held, on the arming thread, whenever an arm makes a timer the
  // new head of this list (its deadline is earlier than every other pending one), with that
  // deadline (this clock's time) and the timer's slack. Dynticks uses it to wake the loop when
  // the arm came from another thread. Set once before timers are armed.
  using HeadChangedHook = std::function<void(const TimerList&, Nanos deadline, Nanos slack)>;
  void set_head_changed_hook(HeadChangedHook hook) { head_changed_hook_ = std::move(hook); }

  // Earliest pending deadline in this clock's time; nullopt when none is pending.
  std::optional<Nanos> next_deadline() const;

  // The head timer's period if it is periodic (the dynticks periodic fast path), else 0.
  Nanos head_period() const;

  // Runs every timer whose deadline is <= `now` (this clock's time), in deadline order. Timers
  // that become due while the pass runs (a callback arming for the past, a periodic timer far
  // behind) wait for the next pass, so one pass is bounded. Returns the number run.
  std::size_t run_expired(Nanos now);

 private:
  friend class Timer;

  // Inserts or moves `t` (mu_ held by caller). Returns true if `t` became the head.
  bool insert_locked(Timer& t);
  void remove_locked(Timer& t);

  const ClockType type_;
  const Clock& clock_;
  HeadChangedHook head_changed_hook_;

  mutable std::mutex mu_;
  std::vector<Timer*> pending_;  // sorted by (deadline, seq); guarded by mu_
  struct Due {
    Timer* timer;
    std::uint64_t seq;
    Nanos deadline;
  };
  std::vector<Due> due_;  // run_expired()'s snapshot; loop thread only
  std::uint64_t next_seq_ = 0;   // guarded by mu_
};

}  // namespace minivmm::timers
