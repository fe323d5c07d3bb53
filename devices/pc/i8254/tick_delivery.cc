#include "devices/pc/i8254/tick_delivery.h"

#include <algorithm>

#include "devices/log/log.h"

namespace minivmm::devices {

using timers::Nanos;

TickDelivery::TickDelivery(timers::TimerList& timers, IrqLine& irq, LostTickPolicy policy,
                           PulseTrain* train) noexcept
    : irq_(irq),
      policy_(policy),
      train_(train),
      audit_(irq, train),
      fallback_timer_(timers, "i8254-irq0-fallback",
                      [this](const timers::Timer::Expiry& e) { on_fallback_timer(e); }),
      retry_timer_(timers, "i8254-irq0-retry",
                   [this](const timers::Timer::Expiry& e) { on_retry_timer(e); }) {
  if (train_) train_->set_turn_hook([this](Nanos now) { on_train_turn(now); });
}

TickDelivery::~TickDelivery() {
  // The train may outlive us (the machine owns both); its thread is stopped by now.
  if (train_) train_->set_turn_hook(nullptr);
}

TickDelivery::Stats TickDelivery::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.ticks_owed = owed_ticks_;
  s.ticks_merged = carried_merged_ + audit_.edges_merged();
  s.ack_audits = carried_audits_ + audit_.audits();
  s.acks_abandoned = carried_abandoned_ || audit_.abandoned();
  s.level_releases = audit_.level_releases();
  s.ticks_injected_by_pit = stats_.ticks_injected;
  s.ticks_injected += carried_delivered_;
  if (train_) s.ticks_injected += train_->delivered();
  // Merged edges were counted when sent; the guest never saw them.
  s.ticks_injected -= std::min(s.ticks_injected, s.ticks_merged);
  return s;
}

bool TickDelivery::restart(const std::optional<Schedule>& periodic, Nanos now) noexcept {
  std::lock_guard lock(mu_);
  collect_missed_locked();  // the old program's: lost with the rest of what it owed, below
  stats_.ticks_lost += owed_ticks_;
  owed_ticks_ = 0;
  retry_timer_.cancel();
  if (train_running_ || falling_back_) {
    train_->stop();  // a held train's teardown too
    train_running_ = false;
  }
  end_fallback_locked();
  if (!periodic) {
    period_ = Nanos{0};
    return false;
  }
  period_ = periodic->period;
  retry_delay_ = base_retry_delay();
  if (!train_ || !train_->start(periodic->first, period_)) return false;
  train_running_ = true;
  ++stats_.train_starts;
  last_train_audit_ = now;
  train_first_ = periodic->first;
  train_since_ = now;
  trouble_seen_ = audit_.edges_merged();
  missed_checked_ = stats_.ticks_missed;
  trouble_checked_ = now;
  return true;
}

bool TickDelivery::falling_back() const {
  std::lock_guard lock(mu_);
  return falling_back_;
}

void TickDelivery::one_shot_edge() noexcept {
  std::lock_guard lock(mu_);
  pulse_locked();
}

std::optional<Nanos> TickDelivery::periodic_expiry(Nanos deadline, Nanos now) noexcept {
  std::lock_guard lock(mu_);
  return periodic_expiry_locked(deadline, now);
}

std::optional<Nanos> TickDelivery::periodic_expiry_locked(Nanos deadline, Nanos now) noexcept {
  const Nanos lateness = now - deadline;
  if (lateness < period_) {
    deliver_periodic_tick_locked(false, now);
    return std::nullopt;
  }
  ++stats_.ticks_late;
  if (policy_ == LostTickPolicy::kDelay) {
    // The grid advanced by one period only, so the missed ticks come due again on the next
    // loop passes, one per pass, each giving the guest a chance to run its handler.
    deliver_periodic_tick_locked(true, now);
    return std::nullopt;
  }
  // kDiscard: drop every whole period missed after this one, deliver this one, and move the
  // grid to its first point after now.
  const auto skipped = lateness / period_;
  stats_.ticks_lost += static_cast<std::uint64_t>(skipped);
  pulse_locked();
  if (++ticks_since_audit_ >= kAuditEveryTicks) audit_locked(now);
  return deadline + (skipped + 1) * period_;
}

void TickDelivery::pulse_locked() noexcept {
  if (direct_) {
    irq_.pulse_now();
  } else {
    irq_.pulse();
  }
  ++stats_.ticks_injected;
  audit_.count_edge();
}

void TickDelivery::on_train_turn(Nanos now) noexcept {
  std::lock_guard lock(mu_);
  if (!train_running_) return;
  if (!audit_.active()) {
    // No acknowledgement count to audit, but the train's missed edges are still owed.
    collect_missed_locked();
    if (owed_ticks_ > 0 && !retry_timer_.pending()) deliver_owed_locked(now);
    return;
  }
  // The train's wakeups come every few periods at slow rates; an audit every
  // 2 * kAuditEveryTicks periods is enough (less half a period: the wakeups drift a little).
  const Nanos every = period_ * static_cast<std::int64_t>(2 * kAuditEveryTicks);
  if (now - last_train_audit_ < every - period_ / 2) return;
  last_train_audit_ = now;
  audit_locked(now);
}

void TickDelivery::audit_locked(Nanos now) noexcept {
  ticks_since_audit_ = 0;
  collect_missed_locked();
  if (audit_.active()) resolve_locked();
  check_train_locked(now);
  if (owed_ticks_ > 0 && !retry_timer_.pending()) deliver_owed_locked(now);
}

void TickDelivery::check_train_locked(Nanos now) noexcept {
  const std::uint64_t merged = audit_.edges_merged();
  const std::uint64_t fresh_merged = merged - std::min(merged, trouble_seen_);
  const std::uint64_t fresh_missed =
      stats_.ticks_missed - std::min(stats_.ticks_missed, missed_checked_);
  const std::int64_t periods = period_ > Nanos{0} ? (now - trouble_checked_) / period_ : 0;
  trouble_seen_ = merged;
  missed_checked_ = stats_.ticks_missed;
  trouble_checked_ = now;
  if (!train_running_) return;
  const bool settled = now - train_since_ >= kTrainSettle && trouble_counts_;
  // The edges a booting guest left unacknowledged with interrupts off are not the train's.
  trouble_counts_ = audit_.acknowledged_once() || !audit_.active();
  const std::uint64_t fresh = fresh_missed + (settled ? fresh_merged : 0);
  if (fresh < kFallbackTroubleEdges) return;
  // fresh * share < periods, without a product that could overflow.
  const auto share = static_cast<std::uint64_t>(kFallbackTroubleShare);
  const auto whole = static_cast<std::uint64_t>(std::max<std::int64_t>(periods, 0));
  if (fresh < (whole + share - 1) / share) return;
  fall_back_locked(now);
}

void TickDelivery::fall_back_locked(Nanos now) noexcept {
  train_->hold();
  collect_missed_locked();  // what the hold found the slots missed
  train_running_ = false;
  falling_back_ = true;
  direct_ = true;
  ++stats_.train_fallbacks;
  if (now - train_since_ >= kTrainTrustedAfter) fallback_hold_ = kFirstFallbackHold;
  fallback_until_ = now + fallback_hold_;
  fallback_hold_ = std::min(fallback_hold_ * 2, kMaxFallbackHold);
  // On with the train's grid: its next point after now.
  const Nanos next = now < train_first_
                         ? train_first_
                         : train_first_ + ((now - train_first_) / period_ + 1) * period_;
  fallback_timer_.arm_periodic(next, period_);
  log::debug("pit: pulse train held ({} edges missed, {} merged so far); the PIT's timer "
             "delivers for {} ms",
             stats_.ticks_missed, trouble_seen_, (fallback_until_ - now).count() / 1'000'000);
}

void TickDelivery::end_fallback_locked() noexcept {
  fallback_timer_.cancel();
  falling_back_ = false;
  direct_ = false;
}

void TickDelivery::on_fallback_timer(const timers::Timer::Expiry& expiry) noexcept {
  std::lock_guard lock(mu_);
  if (!falling_back_) return;
  ++stats_.fallback_ticks;
  if (const auto next = periodic_expiry_locked(expiry.deadline, expiry.now)) {
    fallback_timer_.arm_periodic(*next, period_);
  }
  if (expiry.now < fallback_until_) return;
  // Time to try the train again, from the grid's next point (the list moved this periodic
  // timer there already).
  const Nanos first = fallback_timer_.pending() ? fallback_timer_.deadline()
                                                : expiry.deadline + period_;
  end_fallback_locked();
  if (train_->start(first, period_)) {
    train_running_ = true;
    train_first_ = first;
    train_since_ = expiry.now;
    last_train_audit_ = expiry.now;
    trouble_seen_ = audit_.edges_merged();
    missed_checked_ = stats_.ticks_missed;
    trouble_checked_ = expiry.now;
    return;
  }
  // The train cannot run at all now: the timer stays on the grid for good.
  falling_back_ = true;
  direct_ = true;
  fallback_until_ = timers::Nanos::max();
  fallback_timer_.arm_periodic(first, period_);
}

void TickDelivery::collect_missed_locked() noexcept {
  if (!train_) return;
  const std::uint64_t missed = train_->missed();
  if (missed <= train_missed_seen_) return;
  const std::uint64_t fresh = missed - train_missed_seen_;
  train_missed_seen_ = missed;
  stats_.ticks_missed += fresh;
  owe_or_lose_locked(fresh);
}

void TickDelivery::owe_or_lose_locked(std::uint64_t ticks) noexcept {
  if (period_ != Nanos{0} && policy_ == LostTickPolicy::kDelay) {
    owed_ticks_ += ticks;
  } else {
    stats_.ticks_lost += ticks;
  }
}

std::optional<AckAudit::Resolution> TickDelivery::resolve_locked() noexcept {
  const auto r = audit_.resolve(train_running_);
  if (r && r->merged > 0) owe_or_lose_locked(r->merged);
  return r;
}

void TickDelivery::on_retry_timer(const timers::Timer::Expiry& expiry) noexcept {
  std::lock_guard lock(mu_);
  if (owed_ticks_ == 0) return;
  deliver_owed_locked(expiry.now);
}

void TickDelivery::deliver_periodic_tick_locked(bool late, Nanos now) noexcept {
  ++owed_ticks_;
  if (!late && owed_ticks_ == 1) {
    // The steady state: on time, nothing owed. An unchecked pulse is the cheapest injection;
    // if the guest left the previous tick pending that long, it asked for what it gets.
    owed_ticks_ = 0;
    pulse_locked();
  } else {
    deliver_owed_locked(now);
  }
  if (++ticks_since_audit_ >= kAuditEveryTicks) audit_locked(now);
}

void TickDelivery::deliver_owed_locked(Nanos now) noexcept {
  // One edge per call: two edges in a row with no guest code between them would merge.
  bool sent = false;
  if (!audit_.active()) {
    sent = irq_.pulse_checked();
    if (sent) audit_.count_edge();
  } else if (line_free_for_owed_locked(now)) {
    irq_.pulse_now();
    audit_.count_edge();
    sent = true;
  }
  if (sent) {
    --owed_ticks_;
    ++stats_.ticks_injected;
    ++stats_.ticks_redelivered;
    retry_delay_ = base_retry_delay();
  } else {
    ++stats_.ticks_coalesced;
    const Nanos base = base_retry_delay();
    retry_delay_ = std::clamp(retry_delay_ * 2, base, std::max(period_, base));
  }
  cap_owed_locked();
  if (owed_ticks_ > 0 && !retry_timer_.pending()) retry_timer_.arm_at(now + retry_delay_);
}

bool TickDelivery::line_free_for_owed_locked(Nanos now) noexcept {
  // The acknowledgement count tells whether the line is free: send only when every edge so far
  // is acknowledged or known merged. KVM_IRQ_LINE_STATUS cannot tell here: while the resampling
  // irqfd holds the line up, the PIC reports an edge on it as delivered.
  const auto r = resolve_locked();
  // No usable count yet (no acknowledgement so far, or none will come): a plain edge.
  if (!r || r->unresolved == 0) return true;
  switch (audit_.judge_doubt(newest_train_edge_recent_locked(now))) {
    case AckAudit::Doubt::kMerged:
      ++owed_ticks_;  // the edge in doubt merged: its tick is owed too
      return true;
    case AckAudit::Doubt::kProbe:
      return true;
    case AckAudit::Doubt::kWait:
      break;
  }
  return false;
}

bool TickDelivery::newest_train_edge_recent_locked(Nanos now) const noexcept {
  return train_running_ && AckAudit::edge_may_be_pending(now, train_first_, period_);
}

void TickDelivery::cap_owed_locked() noexcept {
  if (owed_ticks_ <= kMaxOwedTicks) return;
  stats_.ticks_lost += owed_ticks_ - kMaxOwedTicks;
  owed_ticks_ = kMaxOwedTicks;
}

Nanos TickDelivery::base_retry_delay() const noexcept {
  return std::clamp(period_ / 4, kMinRetryDelay, kMaxRetryDelay);
}

}  // namespace minivmm::devices
