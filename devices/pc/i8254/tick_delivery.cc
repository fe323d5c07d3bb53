#include "devices/pc/i8254/tick_delivery.h"

#include <algorithm>

namespace minivmm::devices {

using timers::Nanos;

TickDelivery::TickDelivery(timers::TimerList& timers, IrqLine& irq, LostTickPolicy policy,
                           PulseTrain* train) noexcept
    : irq_(irq),
      policy_(policy),
      train_(train),
      audit_(irq, train),
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
  s.ticks_merged = audit_.edges_merged();
  s.ack_audits = audit_.audits();
  s.acks_abandoned = audit_.abandoned();
  s.ticks_injected_by_pit = stats_.ticks_injected;
  if (train_) s.ticks_injected += train_->delivered();
  // Merged edges were counted when sent; the guest never saw them.
  s.ticks_injected -= std::min(s.ticks_injected, s.ticks_merged);
  return s;
}

bool TickDelivery::restart(const std::optional<Schedule>& periodic, Nanos now) noexcept {
  std::lock_guard lock(mu_);
  stats_.ticks_lost += owed_ticks_;
  owed_ticks_ = 0;
  retry_timer_.cancel();
  if (train_running_) {
    train_->stop();
    train_running_ = false;
  }
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
  return true;
}

void TickDelivery::one_shot_edge() noexcept {
  std::lock_guard lock(mu_);
  pulse_locked();
}

std::optional<Nanos> TickDelivery::periodic_expiry(Nanos deadline, Nanos now) noexcept {
  std::lock_guard lock(mu_);
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
  irq_.pulse();
  ++stats_.ticks_injected;
  audit_.count_edge();
}

void TickDelivery::on_train_turn(Nanos now) noexcept {
  std::lock_guard lock(mu_);
  if (!train_running_ || !audit_.active()) return;
  // The train's wakeups come every few periods at slow rates; an audit every
  // 2 * kAuditEveryTicks periods is enough (less half a period: the wakeups drift a little).
  const Nanos every = period_ * static_cast<std::int64_t>(2 * kAuditEveryTicks);
  if (now - last_train_audit_ < every - period_ / 2) return;
  last_train_audit_ = now;
  audit_locked(now);
}

void TickDelivery::audit_locked(Nanos now) noexcept {
  ticks_since_audit_ = 0;
  if (!audit_.active()) return;
  if (!resolve_locked()) return;
  if (owed_ticks_ > 0 && !retry_timer_.pending()) deliver_owed_locked(now);
}

std::optional<AckAudit::Resolution> TickDelivery::resolve_locked() noexcept {
  const auto r = audit_.resolve(train_running_);
  if (!r || r->merged == 0) return r;
  if (period_ != Nanos{0} && policy_ == LostTickPolicy::kDelay) {
    owed_ticks_ += r->merged;
  } else {
    stats_.ticks_lost += r->merged;
  }
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
    irq_.pulse();
    audit_.count_edge();
    sent = true;
  }
  if (sent) {
    --owed_ticks_;
    ++stats_.ticks_injected;
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
