#include "devices/pc/i8254/i8254_pit.h"

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

using timers::Nanos;

constexpr std::uint16_t kControlOffset = 3;
constexpr std::uint8_t kFloatingBus = 0xff;

// Enough to see a confused guest without letting it flood the log.
constexpr std::uint64_t kMaxBadAccessLogs = 16;

}  // namespace

I8254Pit::I8254Pit(timers::TimerList& vm_timers, IrqLine& irq0, LostTickPolicy policy,
                   PulseTrain* train)
    : clock_(vm_timers.clock()),
      // Counters 0 and 1 have GATE tied high on a PC; counter 2's comes from port 0x61, low at
      // reset.
      channels_{I8254Channel(true), I8254Channel(true), I8254Channel(false)},
      delivery_(vm_timers, irq0, policy, train),
      irq_timer_(vm_timers, "i8254-irq0",
                 [this](const timers::Timer::Expiry& e) { on_irq_timer(e); }) {}

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
  static_cast<TickDelivery::Stats&>(s) = delivery_.stats();
  return s;
}

void I8254Pit::report(ReportWriter& out) const {
  const Stats s = stats();
  out.count("ticks_injected", s.ticks_injected);
  out.count("ticks_late", s.ticks_late);
  out.count("ticks_lost", s.ticks_lost);
  out.count("ticks_coalesced", s.ticks_coalesced);
  out.count("ticks_owed", s.ticks_owed);
  out.count("reprogrammings", s.reprogrammings);
  out.count("period_clamps", s.period_clamps);
  out.count("timer_arms", s.timer_arms);
  out.count("train_starts", s.train_starts);
  out.count("train_fallbacks", s.train_fallbacks);
  out.count("fallback_ticks", s.fallback_ticks);
  out.count("bad_accesses", s.bad_accesses);
  out.count("ticks_merged", s.ticks_merged);
  out.count("ticks_missed", s.ticks_missed);
  out.count("irq_level_releases", s.level_releases);
  out.count("ticks_redelivered", s.ticks_redelivered);
  out.count("ticks_injected_by_pit", s.ticks_injected_by_pit);
  out.count("ack_audits", s.ack_audits);
  out.flag("acks_abandoned", s.acks_abandoned);
  // The run report's name for it: the train the VMM attaches is the host kernel's.
  if (const PulseTrain* train = delivery_.train()) {
    out.object("kernel_train", [train](ReportWriter& w) { train->report(w); });
  }
}

std::uint8_t I8254Pit::read_byte_locked(std::uint16_t offset, Nanos now) noexcept {
  if (offset < kControlOffset) return channels_[offset].read(now);
  // The control word register is write-only; past it is port 0x44, not ours.
  if (++stats_.bad_accesses <= kMaxBadAccessLogs) {
    log::debug("guest: pit read of offset {}", offset);
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
      log::debug("guest: pit write 0x{:02x} to offset {}", value, offset);
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
  const auto edges = channels_[0].next_rising_edges(now);
  timer_period_ = edges ? irq_period_locked(edges->period) : Nanos{0};
  std::optional<TickDelivery::Schedule> periodic;
  if (timer_period_ != Nanos{0}) periodic = TickDelivery::Schedule{edges->first, timer_period_};
  // The delivery drops what the old program owed, and takes a periodic one to the train if it
  // can: then, as with no edges at all, the IRQ0 timer has nothing to do.
  if (delivery_.restart(periodic, now) || !edges) {
    irq_timer_.cancel();
    expected_deadline_.reset();
    return;
  }
  expected_deadline_ = edges->first;
  ++stats_.timer_arms;
  if (timer_period_ == Nanos{0}) {
    irq_timer_.arm_at(edges->first);
  } else {
    irq_timer_.arm_periodic(edges->first, timer_period_);
  }
}

Nanos I8254Pit::irq_period_locked(Nanos period) noexcept {
  if (period == Nanos{0} || period >= kMinIrqPeriod) return period;
  ++stats_.period_clamps;
  return kMinIrqPeriod;
}

void I8254Pit::on_irq_timer(const timers::Timer::Expiry& expiry) noexcept {
  std::lock_guard lock(mu_);
  if (!expected_deadline_ || expiry.deadline != *expected_deadline_) return;  // superseded
  // A count rewritten in mode 2/3 takes over exactly at this edge.
  channels_[0].settle(expiry.deadline);

  if (timer_period_ == Nanos{0}) {  // modes 0 and 4: the one edge
    expected_deadline_.reset();
    delivery_.one_shot_edge();
    return;
  }
  // The list has already moved the periodic timer one period on; follow it.
  expected_deadline_ = expiry.deadline + timer_period_;
  if (const auto next = delivery_.periodic_expiry(expiry.deadline, expiry.now)) {
    // kDiscard skipped the periods missed: the grid moves to its first point after now, and
    // keeps its phase.
    expected_deadline_ = *next;
    ++stats_.timer_arms;
    irq_timer_.arm_periodic(*next, timer_period_);
  }
}

}  // namespace minivmm::devices
