#include "timers/timer_list.h"

#include <algorithm>

#include "timers/timer.h"

namespace minivmm::timers {
std::string_view clock_type_name(ClockType type) noexcept {
  switch (type) {
    case ClockType::kVm:
      return "vm_clock";
    case ClockType::kRt:
      return "rt_clock";
  }
  return "?";
}

TimerList::~TimerList() {
  std::lock_guard lock(mu_);
  for (Timer* t : pending_) t->pending_ = false;
  pending_.clear();
}

bool TimerList::insert_locked(Timer& t) {
  remove_locked(t);
  t.seq_ = next_seq_++;
  t.pending_ = true;
  // After every timer with an earlier or equal deadline: equal deadlines fire in arm order.
  auto pos = std::find_if(pending_.begin(), pending_.end(),
                          [&](const Timer* other) { return other->deadline_ > t.deadline_; });
  const bool head = pos == pending_.begin();
  pending_.insert(pos, &t);
  return head;
}

void TimerList::remove_locked(Timer& t) {
  if (!t.pending_) return;
  auto it = std::find(pending_.begin(), pending_.end(), &t);
  if (it != pending_.end()) pending_.erase(it);
  t.pending_ = false;
}

std::optional<Nanos> TimerList::next_deadline() const {
  std::lock_guard lock(mu_);
  if (pending_.empty()) return std::nullopt;
  return pending_.front()->deadline_;
}

Nanos TimerList::head_period() const {
  std::lock_guard lock(mu_);
  if (pending_.empty()) return Nanos{0};
  return pending_.front()->period_;
}

std::size_t TimerList::run_expired(Nanos now) {
  // Snapshot the due timers first (libuv's ready queue): what callbacks arm lands in the next
  // pass, so a callback re-arming for the past cannot starve the loop.
  std::vector<Due>& due = due_;  // kept between passes: no allocation per tick
  due.clear();
  {
    std::lock_guard lock(mu_);
    for (Timer* t : pending_) {
      if (t->deadline_ > now) break;
      due.push_back({t, t->seq_, t->deadline_});
    }
  }
  std::size_t ran = 0;
  for (const Due& d : due) {
    {
      std::lock_guard lock(mu_);
      // An earlier callback in this pass may have cancelled, re-armed or even destroyed it:
      // find it by address before touching it, and match the arm sequence number.
      if (std::find(pending_.begin(), pending_.end(), d.timer) == pending_.end() ||
          d.timer->seq_ != d.seq) {
        continue;
      }
      remove_locked(*d.timer);
      if (d.timer->period_ > Nanos{0}) {
        d.timer->deadline_ += d.timer->period_;
        insert_locked(*d.timer);
      }
      ++d.timer->fired_;
    }
    d.timer->cb_(Timer::Expiry{d.deadline, now});
    ++ran;
  }
  return ran;
}

}  // namespace minivmm::timers
