#include "timers/timer.h"

#include "timers/timer_list.h"

namespace minivmm::timers {

Timer::Timer(TimerList& list, std::string name, Callback cb)
    : list_(list), name_(std::move(name)), cb_(std::move(cb)) {}

Timer::~Timer() { cancel(); }

void Timer::arm(Nanos deadline, Nanos period) {
  bool new_head = false;
  Nanos slack{0};
  {
    std::lock_guard lock(list_.mu_);
    deadline_ = deadline;
    period_ = period;
    slack = slack_;
    new_head = list_.insert_locked(*this);
  }
  if (new_head && list_.head_changed_hook_) list_.head_changed_hook_(list_, deadline, slack);
}

void Timer::arm_at(Nanos deadline) { arm(deadline, Nanos{0}); }

void Timer::arm_after(Nanos delay) { arm(list_.clock().now() + delay, Nanos{0}); }

void Timer::arm_periodic(Nanos first, Nanos period) {
  arm(first, period > Nanos{0} ? period : Nanos{0});
}

void Timer::set_slack(Nanos slack) {
  std::lock_guard lock(list_.mu_);
  slack_ = slack > Nanos{0} ? slack : Nanos{0};
}

void Timer::cancel() {
  std::lock_guard lock(list_.mu_);
  list_.remove_locked(*this);
}

bool Timer::pending() const {
  std::lock_guard lock(list_.mu_);
  return pending_;
}

Nanos Timer::deadline() const {
  std::lock_guard lock(list_.mu_);
  return deadline_;
}

Nanos Timer::period() const {
  std::lock_guard lock(list_.mu_);
  return period_;
}

std::uint64_t Timer::fired() const {
  std::lock_guard lock(list_.mu_);
  return fired_;
}

}  // namespace minivmm::timers
