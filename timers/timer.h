// A timer on one clock's TimerList. Make it a member of the object that owns the callback
// (Chromium base/timer): destruction cancels it, so a callback never outlives its receiver.
// Non-copyable and non-movable because the list holds its address.
//
// Threads: arm*/cancel/pending/deadline from any thread; the callback runs on the loop thread,
// without the list lock. A callback may re-arm its own timer or any other.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "timers/clock.h"

namespace minivmm::timers {

class TimerList;

class Timer {
 public:
  // `deadline` is the expiry that fired (in the list clock's time), `now` the loop's reading of
  // that clock for this pass: a callback needs neither to read a clock.
  struct Expiry {
    Nanos deadline;
    Nanos now;
  };
  using Callback = std::function<void(const Expiry&)>;

  Timer(TimerList& list, std::string name, Callback cb);
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  ~Timer();

  // One-shot at an absolute time of the list's clock.
  void arm_at(Nanos deadline);
  // One-shot `delay` from now (reads the clock).
  void arm_after(Nanos delay);
  // Periodic: first expiry at `first`, then every `period` (> 0) on a fixed grid, so expiries
  // never drift. The list re-arms it just before the callback runs; a late pass still fires
  // once per grid point (the lost-tick "delay" policy), one per pass.
  void arm_periodic(Nanos first, Nanos period);
  void cancel();

  // How late this timer may fire. An arm from another thread does not wake the loop when the
  // loop is already due to wake within `slack` of the deadline (Linux timer slack, Chromium's
  // leeway): a console flush can ride on the next PIT tick instead of costing a wakeup.
  void set_slack(Nanos slack);

  bool pending() const;
  Nanos deadline() const;  // meaningful only while pending()
  Nanos period() const;    // 0 for a one-shot timer
  const std::string& name() const noexcept { return name_; }
  std::uint64_t fired() const;  // expiries run so far

 private:
  friend class TimerList;

  void arm(Nanos deadline, Nanos period);

  TimerList& list_;
  const std::string name_;
  const Callback cb_;

  // Guarded by list_.mu_.
  bool pending_ = false;
  Nanos deadline_{0};
  Nanos period_{0};
  Nanos slack_{0};
  std::uint64_t seq_ = 0;
  std::uint64_t fired_ = 0;
};

}  // namespace minivmm::timers
