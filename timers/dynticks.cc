#include "timers/dynticks.h"

#include <algorithm>

namespace minivmm::timers {

Dynticks::Dynticks(AlarmTimer& alarm, const Clock& monotonic, std::vector<TimerList*> lists,
                   DynticksOptions options)
    : alarm_(alarm),
      monotonic_(monotonic),
      lists_(std::move(lists)),
      options_(options),
      owner_(std::this_thread::get_id()) {
  for (TimerList* list : lists_) {
    list->set_head_changed_hook([this](const TimerList& l, Nanos deadline, Nanos slack) {
      on_head_changed(l, deadline, slack);
    });
  }
}

void Dynticks::adopt_current_thread() noexcept {
  owner_.store(std::this_thread::get_id(), std::memory_order_release);
}

void Dynticks::on_head_changed(const TimerList& list, Nanos deadline, Nanos slack) {
  if (std::this_thread::get_id() == owner_.load(std::memory_order_acquire)) {
    stale_.store(true, std::memory_order_relaxed);
    return;
  }
  // Another thread (a vCPU) moved a list head earlier. Wake the loop only if it would
  // otherwise sleep past deadline + slack.
  const auto host = list.clock().to_monotonic(deadline);
  if (!host) return;  // a paused clock: resume() re-arms
  const std::int64_t published = published_ns_.load(std::memory_order_seq_cst);
  if (published != kPublishedComputing && published <= (*host + slack).count()) {
    absorbed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  woken_.fetch_add(1, std::memory_order_relaxed);
  if (wake_) wake_();
}

std::optional<Nanos> Dynticks::poll_timeout() const noexcept {
  if (!armed_) return std::nullopt;
  return std::max(target_ - now_, Nanos{0});
}

bool Dynticks::deadline_passed() noexcept {
  if (!armed_) return false;
  now_ = monotonic_.now();
  ++stats_.clock_reads;
  return now_ >= target_;
}

bool Dynticks::run_timers(bool alarm_fired) {
  ++stats_.passes;
  now_ = monotonic_.now();
  ++stats_.clock_reads;
  if (alarm_fired) {
    ++stats_.alarm_wakeups;
    if (armed_ && now_ > target_) {
      const auto late = static_cast<std::uint64_t>((now_ - target_).count());
      stats_.late_ns_total += late;
      stats_.late_ns_max = std::max(stats_.late_ns_max, late);
    }
  }
  std::size_t ran = 0;
  for (TimerList* list : lists_) {
    // A paused clock's timers do not run (its from_monotonic is frozen, and to_monotonic says
    // it has no host deadline).
    if (!list->clock().to_monotonic(Nanos{0})) continue;
    ran += list->run_expired(list->clock().from_monotonic(now_));
  }
  stats_.timers_run += ran;
  if (alarm_fired && ran == 0) {
    // Woken at or after the armed deadline with nothing to run: the timer it was armed for
    // went away (a cancel from another thread does not re-arm). Woken before it: false.
    if (armed_ && now_ >= target_) {
      ++stats_.cancelled_wakeups;
    } else {
      ++stats_.false_wakeups;
    }
  }
  return update_alarm();
}

bool Dynticks::rearm() {
  now_ = monotonic_.now();
  ++stats_.clock_reads;
  return update_alarm();
}

bool Dynticks::suspend() {
  stale_.store(false, std::memory_order_relaxed);
  publish(kPublishedNone);
  if (!armed_) return true;
  armed_ = false;
  interval_ = Nanos{0};
  ++stats_.disarms;
  if (alarm_.has_host_timer() && !alarm_.disarm()) {
    ++stats_.alarm_failures;
    return false;
  }
  return true;
}

bool Dynticks::update_alarm() {
  stale_.store(false, std::memory_order_relaxed);
  publish(kPublishedComputing);
  // Every return below publishes what the loop will now wake for.
  struct Publisher {
    Dynticks& d;
    ~Publisher() { d.publish(d.armed_ ? d.target_.count() : kPublishedNone); }
  } publisher{*this};

  // The merged deadline, in host time, and the period of the timer that owns it.
  std::optional<Nanos> earliest;
  Nanos period{0};
  for (TimerList* list : lists_) {
    const auto local = list->next_deadline();
    if (!local) continue;
    const auto host = list->clock().to_monotonic(*local);
    if (!host) continue;  // paused clock
    if (!earliest || *host < *earliest) {
      earliest = host;
      period = list->head_period();
    }
  }

  const bool host_timer = alarm_.has_host_timer();
  if (alarm_.fixed_rate()) {
    // The baseline does not follow deadlines; keep the bookkeeping for poll_timeout() only.
    armed_ = earliest.has_value();
    if (earliest) target_ = *earliest;
    return true;
  }

  if (!earliest) {
    if (!armed_) return true;
    armed_ = false;
    interval_ = Nanos{0};
    ++stats_.disarms;
    if (host_timer && !alarm_.disarm()) {
      ++stats_.alarm_failures;
      return false;
    }
    return true;
  }

  Nanos target = *earliest;
  Nanos interval = period;
  if (target < now_ + options_.min_delta) {
    target = now_ + options_.min_delta;
    interval = Nanos{0};  // off the grid: a one-shot until the timer is back on time
    ++stats_.clamped;
  }

  if (armed_) {
    const bool same = target == target_ && interval == interval_;
    // Periodic fast path: the host timer already repeats every `interval` from target_, and
    // `target` is the next point of that grid after now, so the kernel fires there by itself.
    const bool on_grid = interval > Nanos{0} && interval == interval_ && target >= target_ &&
                         (target - target_) % interval == Nanos{0} && target - interval <= now_;
    if (same || on_grid) {
      target_ = target;
      ++stats_.arms_skipped;
      return true;
    }
  }

  armed_ = true;
  target_ = target;
  interval_ = interval;
  if (!host_timer) return true;  // poll-timeout alarm: the timeout is the arm, no syscall
  ++stats_.arms;
  if (!alarm_.arm(target, interval)) {
    ++stats_.alarm_failures;
    return false;
  }
  return true;
}

}  // namespace minivmm::timers
