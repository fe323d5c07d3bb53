#include "devices/pc/i8254/i8254_pit.h"

#include <algorithm>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

using timers::Nanos;

constexpr std::uint16_t kControlOffset = 3;
constexpr std::uint8_t kFloatingBus = 0xff;

// Retry pacing for owed ticks (kDelay): a quarter period gives the guest time to run its
// handler, bounded so a slow tick still retries promptly and a fast one not absurdly often.
constexpr Nanos kMinRetryDelay{25'000};
constexpr Nanos kMaxRetryDelay{1'000'000};

// Enough to see a confused guest without letting it flood the log.
constexpr std::uint64_t kMaxBadAccessLogs = 16;

}  // namespace

I8254Pit::I8254Pit(timers::TimerList& vm_timers, IrqLine& irq0, LostTickPolicy policy,
                   PulseTrain* train)
    : clock_(vm_timers.clock()),
      irq0_(irq0),
      policy_(policy),
      train_(train),
      // Counters 0 and 1 have GATE tied high on a PC; counter 2's comes from port 0x61, low at
      // reset.
      channels_{I8254Channel(true), I8254Channel(true), I8254Channel(false)},
      irq_timer_(vm_timers, "i8254-irq0",
                 [this](const timers::Timer::Expiry& e) { on_irq_timer(e); }),
      retry_timer_(vm_timers, "i8254-irq0-retry",
                   [this](const timers::Timer::Expiry& e) { on_retry_timer(e); }) {
  // A wire that cannot count acknowledgements (a test fake, another VMM's line) is never asked
  // again.
  acks_unavailable_ = !irq0_.acknowledgements().has_value();
  if (train_) train_->set_turn_hook([this](Nanos now) { on_train_turn(now); });
}

I8254Pit::~I8254Pit() {
  // The train may outlive us (the machine owns both); its thread is stopped by now.
  if (train_) train_->set_turn_hook(nullptr);
}

void I8254Pit::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  const Nanos now = clock_.now();
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = read_byte_locked(static_cast<std::uint16_t>(offset + i), now);
  }
}

void I8254Pit::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  const Nanos now = clock_.now();
  for (std::size_t i = 0; i < data.size(); ++i) {
    write_byte_locked(static_cast<std::uint16_t>(offset + i), data[i], now);
  }
}

void I8254Pit::set_gate(int channel, bool level) noexcept {
  if (channel < 0 || channel >= kChannelCount) return;
  std::lock_guard lock(mu_);
  const Nanos now = clock_.now();
  if (channels_[static_cast<std::size_t>(channel)].set_gate(level, now) && channel == 0) {
    reschedule_locked(now);
  }
}

bool I8254Pit::gate(int channel) const noexcept {
  if (channel < 0 || channel >= kChannelCount) return false;
  std::lock_guard lock(mu_);
  return channels_[static_cast<std::size_t>(channel)].gate();
}

bool I8254Pit::out(int channel) noexcept {
  if (channel < 0 || channel >= kChannelCount) return false;
  std::lock_guard lock(mu_);
  return channels_[static_cast<std::size_t>(channel)].out(clock_.now());
}

I8254Pit::Stats I8254Pit::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.ticks_owed = owed_ticks_;
  s.ticks_injected_by_pit = stats_.ticks_injected;
  if (train_) s.ticks_injected += train_->delivered();
  // Merged edges were counted when sent; the guest never saw them.
  s.ticks_injected -= std::min(s.ticks_injected, edges_merged_);
  return s;
}

std::uint8_t I8254Pit::read_byte_locked(std::uint16_t offset, Nanos now) noexcept {
  if (offset < kControlOffset) return channels_[offset].read(now);
  // The control word register is write-only; past it is port 0x44, not ours.
  if (++stats_.bad_accesses <= kMaxBadAccessLogs) {
    log::debug("guest: i8254 read of offset {}", offset);
  }
  return kFloatingBus;
}

void I8254Pit::write_byte_locked(std::uint16_t offset, std::uint8_t value, Nanos now) noexcept {
  if (offset == kControlOffset) {
    write_control_locked(value, now);
    return;
  }
  if (offset > kControlOffset) {
    if (++stats_.bad_accesses <= kMaxBadAccessLogs) {
      log::debug("guest: i8254 write 0x{:02x} to offset {}", value, offset);
    }
    return;
  }
  const auto result = channels_[offset].write(value, now);
  if (result == I8254Channel::WriteResult::kPartial) return;
  if (result == I8254Channel::WriteResult::kCount) ++stats_.reprogrammings;
  if (offset == 0) reschedule_locked(now);
}

void I8254Pit::write_control_locked(std::uint8_t value, Nanos now) noexcept {
  const auto select = static_cast<std::uint8_t>(value >> kPitControlSelectShift);
  if (select == kPitSelectReadBack) {
    for (std::size_t c = 0; c < channels_.size(); ++c) {
      if ((value & (kPitReadBackCounter0 << c)) == 0) continue;
      if ((value & kPitReadBackNoCount) == 0) channels_[c].latch_count(now);
      if ((value & kPitReadBackNoStatus) == 0) channels_[c].latch_status(now);
    }
    return;
  }
  const auto access = static_cast<std::uint8_t>((value >> kPitControlAccessShift) & 0x3u);
  if (access == kPitAccessLatch) {
    channels_[select].latch_count(now);
    return;
  }
  channels_[select].write_control(value, now);
  ++stats_.reprogrammings;
  if (select == 0) reschedule_locked(now);
}

void I8254Pit::reschedule_locked(Nanos now) noexcept {
  // Ticks the old program still owed are of no use to the new one (a guest switching from
  // periodic to one-shot would take them for its one-shot).
  stats_.ticks_lost += owed_ticks_;
  owed_ticks_ = 0;
  retry_timer_.cancel();
  if (train_running_) {
    train_->stop();
    train_running_ = false;
  }

  const auto edges = channels_[0].next_rising_edges(now);
  if (!edges) {
    irq_timer_.cancel();
    expected_deadline_.reset();
    timer_period_ = Nanos{0};
    return;
  }
  expected_deadline_ = edges->first;
  if (edges->period == Nanos{0}) {
    timer_period_ = Nanos{0};
    ++stats_.timer_arms;
    irq_timer_.arm_at(edges->first);
    return;
  }
  timer_period_ = edges->period;
  if (timer_period_ < kMinIrqPeriod) {
    timer_period_ = kMinIrqPeriod;
    ++stats_.period_clamps;
  }
  retry_delay_ = base_retry_delay();
  if (train_ && train_->start(edges->first, timer_period_)) {
    train_running_ = true;
    ++stats_.train_starts;
    irq_timer_.cancel();
    expected_deadline_.reset();
    last_train_audit_ = now;
    train_first_ = edges->first;
    return;
  }
  ++stats_.timer_arms;
  irq_timer_.arm_periodic(edges->first, timer_period_);
}

void I8254Pit::on_irq_timer(const timers::Timer::Expiry& expiry) noexcept {
  std::lock_guard lock(mu_);
  if (!expected_deadline_ || expiry.deadline != *expected_deadline_) return;  // superseded
  // A count rewritten in mode 2/3 takes over exactly at this edge.
  channels_[0].settle(expiry.deadline);

  if (timer_period_ == Nanos{0}) {  // modes 0 and 4: the one edge
    expected_deadline_.reset();
    pulse_locked();
    return;
  }

  // The list has already moved the periodic timer one period on; follow it.
  expected_deadline_ = expiry.deadline + timer_period_;
  const Nanos lateness = expiry.now - expiry.deadline;
  if (lateness < timer_period_) {
    deliver_periodic_tick_locked(false, expiry.now);
    return;
  }
  ++stats_.ticks_late;
  if (policy_ == LostTickPolicy::kDelay) {
    // The grid advanced by one period only, so the missed ticks come due again on the next
    // loop passes, one per pass, each giving the guest a chance to run its handler.
    deliver_periodic_tick_locked(true, expiry.now);
    return;
  }
  // kDiscard: drop every whole period missed after this one, deliver this one, and move the
  // grid to its first point after now.
  const auto skipped = lateness / timer_period_;
  stats_.ticks_lost += static_cast<std::uint64_t>(skipped);
  const Nanos next = expiry.deadline + (skipped + 1) * timer_period_;
  expected_deadline_ = next;
  ++stats_.timer_arms;
  irq_timer_.arm_periodic(next, timer_period_);
  pulse_locked();
  if (++ticks_since_audit_ >= kAuditEveryTicks) audit_locked(expiry.now);
}

void I8254Pit::pulse_locked() noexcept {
  irq0_.pulse();
  ++stats_.ticks_injected;
  ++edges_sent_;
}

void I8254Pit::on_train_turn(Nanos now) noexcept {
  std::lock_guard lock(mu_);
  if (!train_running_ || acks_unavailable_) return;
  // The train's wakeups come every few periods at slow rates; an audit every
  // 2 * kAuditEveryTicks periods is enough (less half a period: the wakeups drift a little).
  const Nanos every = timer_period_ * static_cast<std::int64_t>(2 * kAuditEveryTicks);
  if (now - last_train_audit_ < every - timer_period_ / 2) return;
  last_train_audit_ = now;
  audit_locked(now);
}

void I8254Pit::audit_locked(Nanos now) noexcept {
  ticks_since_audit_ = 0;
  if (acks_unavailable_) return;
  if (!resolve_acks_locked()) return;
  if (owed_ticks_ > 0 && !retry_timer_.pending()) deliver_owed_locked(now);
}

std::uint64_t I8254Pit::edges_sent_locked() noexcept {
  return edges_sent_ + (train_ ? train_->delivered() : 0);
}

std::optional<std::uint64_t> I8254Pit::resolve_acks_locked() noexcept {
  // The edges are counted before the acknowledgements are read: an edge the train delivers in
  // between may be acknowledged already or still on its way through KVM's irqfd worker, and
  // counted as sent but not acknowledged it would pass for one that merged. (Our own pulses
  // cannot race: mu_ is held. One just sent and still in KVM's worker counts as the one that
  // may be pending.)
  const std::uint64_t sent = edges_sent_locked();
  const auto acks = irq0_.acknowledgements();
  if (!acks) {
    acks_unavailable_ = true;
    return std::nullopt;
  }
  ++stats_.ack_audits;
  last_acks_ = *acks;
  if (!acks_seen_) {
    // Nothing is concluded before the guest's first acknowledgement: until then it may simply
    // not have enabled interrupts, or take IRQ0 through a path that never reports one.
    if (*acks == 0) {
      if (sent >= kAcklessEdgesLimit) {
        log::info("i8254: no acknowledgement of IRQ0 in {} edges; ticks go out unchecked",
                  sent);
        acks_unavailable_ = true;
        stats_.acks_abandoned = true;
        irq0_.stop_acknowledgements();
      }
      return std::nullopt;
    }
    acks_seen_ = true;
  }
  const std::uint64_t ours = *acks - std::min(*acks, acks_foreign_);
  const std::uint64_t resolved = ours + edges_merged_;
  if (resolved > sent) {
    // More acknowledgements than edges counted before them: edges the train delivered since,
    // something else that raised the line (a test device on the same GSI), or an edge declared
    // merged in doubt that was in fact pending. Only what exceeds every edge sent by now is
    // not ours.
    const std::uint64_t sent_now = train_running_ ? edges_sent_locked() : sent;
    if (resolved > sent_now) acks_foreign_ += resolved - sent_now;
    return 0;
  }
  const std::uint64_t unresolved = sent - resolved;
  if (unresolved == 0) in_doubt_ = false;
  if (unresolved < 2) return unresolved;  // one may still be pending
  const std::uint64_t merged = unresolved - 1;
  edges_merged_ += merged;
  stats_.ticks_merged += merged;
  if (timer_period_ != Nanos{0} && policy_ == LostTickPolicy::kDelay) {
    owed_ticks_ += merged;
  } else {
    stats_.ticks_lost += merged;
  }
  return 1;
}

void I8254Pit::on_retry_timer(const timers::Timer::Expiry& expiry) noexcept {
  std::lock_guard lock(mu_);
  if (owed_ticks_ == 0) return;
  deliver_owed_locked(expiry.now);
}

void I8254Pit::deliver_periodic_tick_locked(bool late, Nanos now) noexcept {
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

void I8254Pit::deliver_owed_locked(Nanos now) noexcept {
  // One edge per call: two edges in a row with no guest code between them would merge.
  bool sent = false;
  if (acks_unavailable_) {
    sent = irq0_.pulse_checked();
    if (sent) ++edges_sent_;
  } else {
    // The acknowledgement count tells whether IRQ0 is free: send only when every edge so far is
    // acknowledged or known merged. KVM_IRQ_LINE_STATUS cannot tell here: while the resampling
    // irqfd holds the line up, the PIC reports an edge on it as delivered.
    const auto unresolved = resolve_acks_locked();
    // No usable count yet (no acknowledgement so far, or none will come): a plain edge.
    bool free = !unresolved || *unresolved == 0;
    if (unresolved && !free) {
      // One edge unresolved: pending, or merged unseen (it came while the previous one was
      // pending or in service, and that one's EOI was counted). Nothing tells which.
      if (!in_doubt_) {
        in_doubt_ = true;
        doubt_acks_ = last_acks_;
        doubtful_retries_ = 0;
      } else if (last_acks_ != doubt_acks_ &&
                 (!train_running_ || now < train_first_ ||
                  (now - train_first_) % timer_period_ >= timer_period_ / 4)) {
        // The guest took an interrupt since: the edge in doubt is not pending, so it merged.
        // While a train runs its edges keep coming, so the one unresolved now may instead be
        // its newest, still pending: that is believed only when the newest edge came less
        // than a quarter period ago (a running guest takes one in far less). Otherwise owing
        // it would hand the guest a tick twice; waiting for the probe instead made a guest
        // catching up on 87 owed ticks take over a second (CI, ctest -j2).
        ++edges_merged_;
        ++stats_.ticks_merged;
        ++owed_ticks_;
        in_doubt_ = false;
        free = true;
      } else if (++doubtful_retries_ > kMaxDoubtfulRetries) {
        // No interrupt taken for several retries: a guest with interrupts off, or one idling
        // for a tick that merged unseen. Waiting would stall the second for ever, so probe
        // with the owed tick: if the first edge was pending the probe merges and the next
        // audit owes it again; if not, the guest takes it and the doubt resolves as above.
        doubtful_retries_ = 0;
        free = true;
      }
    }
    if (free) {
      irq0_.pulse();
      ++edges_sent_;
      sent = true;
    }
  }
  if (sent) {
    --owed_ticks_;
    ++stats_.ticks_injected;
    retry_delay_ = base_retry_delay();
  } else {
    ++stats_.ticks_coalesced;
    const Nanos base = base_retry_delay();
    retry_delay_ = std::clamp(retry_delay_ * 2, base, std::max(timer_period_, base));
  }
  if (owed_ticks_ > kMaxOwedTicks) {
    stats_.ticks_lost += owed_ticks_ - kMaxOwedTicks;
    owed_ticks_ = kMaxOwedTicks;
  }
  if (owed_ticks_ > 0 && !retry_timer_.pending()) retry_timer_.arm_at(now + retry_delay_);
}

Nanos I8254Pit::base_retry_delay() const noexcept {
  return std::clamp(timer_period_ / 4, kMinRetryDelay, kMaxRetryDelay);
}

}  // namespace minivmm::devices
