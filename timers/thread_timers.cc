#include "timers/thread_timers.h"

#include <cerrno>
#include <system_error>

namespace minivmm::timers {

ThreadTimers::ThreadTimers(const Clock& monotonic, std::vector<TimerList*> lists,
                           DynticksOptions options)
    : dynticks_(alarm_, monotonic, std::move(lists), options) {}

void ThreadTimers::attach() {
  alarm_.attach_current_thread();
  dynticks_.adopt_current_thread();
  if (!dynticks_.rearm()) {
    throw std::system_error(errno, std::generic_category(), "timer_settime");
  }
  publish();
}

void ThreadTimers::set_wake(std::function<void()> wake) {
  dynticks_.set_wake([this, wake = std::move(wake)] {
    woken_.store(true, std::memory_order_seq_cst);
    if (wake) wake();
  });
}

bool ThreadTimers::before_wait() {
  const bool woken = woken_.exchange(false, std::memory_order_seq_cst);
  if (suspended_ || (!woken && !dynticks_.stale())) return true;
  const bool ok = dynticks_.rearm();
  publish();
  return ok;
}

bool ThreadTimers::after_interrupted() {
  ++interruptions_;
  const int taken = alarm_.take();
  if (taken < 0) return false;
  if (taken > 0) ++signals_taken_;
  bool ok = true;
  // Suspended: nothing runs until resume() (an expiry that beat the disarm is dropped). A kick
  // without the signal: another thread's arm is applied by before_wait(), pause/stop by the host.
  if (taken > 0 && !suspended_) ok = dynticks_.run_timers(true);
  publish();
  return ok;
}

bool ThreadTimers::suspend() {
  suspended_ = true;
  const bool ok = dynticks_.suspend();
  publish();
  return ok;
}

bool ThreadTimers::resume() {
  suspended_ = false;
  // An expiry that fired before suspend() disarmed may still be pending; it is stale now.
  if (alarm_.take() < 0) return false;
  // Timers that fell due while suspended run now (a paused vm_clock has none).
  const bool ok = dynticks_.run_timers(false);
  publish();
  return ok;
}

ThreadTimersStats ThreadTimers::stats() const {
  std::lock_guard lock(stats_mu_);
  return published_;
}

void ThreadTimers::publish() {
  std::lock_guard lock(stats_mu_);
  published_.passes = dynticks_.stats();
  published_.interruptions = interruptions_;
  published_.signals_taken = signals_taken_;
}

}  // namespace minivmm::timers
