// The PIT's snapshot record: the three counters field by field, the chip's counters, and what
// TickDelivery keeps across a restore. Counter times (run start, reload point) are vm_clock
// instants, which a restore sets back to the snapshot's before loading, so rescheduling from
// the loaded counter 0 puts IRQ0 on the grid it was on.
#include <algorithm>
#include <string>

#include "devices/pc/i8254/i8254_pit.h"

namespace minivmm::devices {
namespace {

using timers::Nanos;

constexpr std::uint8_t kPitStateVersion = 1;

void write_nanos(StateWriter& out, Nanos t) { out.i64(t.count()); }
Nanos read_nanos(StateReader& in) { return Nanos{in.i64()}; }

bool bcd_digits(std::uint16_t v) noexcept {
  for (unsigned shift = 0; shift < 16; shift += 4) {
    if (((v >> shift) & 0xfu) > 9) return false;
  }
  return true;
}

void write_delivery_stats(StateWriter& out, const TickDelivery::Stats& s) {
  for (std::uint64_t v : {s.ticks_injected, s.ticks_late, s.ticks_lost, s.ticks_coalesced,
                          s.ticks_missed, s.ticks_redelivered, s.train_starts,
                          s.train_fallbacks, s.fallback_ticks}) {
    out.u64(v);
  }
}

TickDelivery::Stats read_delivery_stats(StateReader& in) {
  TickDelivery::Stats s;
  for (std::uint64_t* v : {&s.ticks_injected, &s.ticks_late, &s.ticks_lost, &s.ticks_coalesced,
                           &s.ticks_missed, &s.ticks_redelivered, &s.train_starts,
                           &s.train_fallbacks, &s.fallback_ticks}) {
    *v = in.u64();
  }
  return s;
}

}  // namespace

void I8254Channel::save_state(StateWriter& out) const {
  out.u8(access_);
  out.u8(mode_bits_);
  out.u8(static_cast<std::uint8_t>(mode_));
  out.boolean(bcd_);
  out.boolean(gate_);
  out.boolean(write_msb_next_);
  out.u8(write_lsb_);
  out.boolean(read_msb_next_);
  out.boolean(latched_count_.has_value());
  out.u16(latched_count_.value_or(0));
  out.boolean(latched_msb_next_);
  out.boolean(latched_status_.has_value());
  out.u8(latched_status_.value_or(0));
  out.u32(cr_);
  out.u32(n_);
  out.boolean(armed_);
  out.boolean(loaded_);
  out.boolean(running_);
  out.boolean(triggered_);
  out.boolean(writing_);
  out.boolean(null_count_);
  write_nanos(out, run_start_);
  out.u64(ticks_base_);
  out.u32(frozen_ce_);
  out.boolean(reload_pending_);
  write_nanos(out, reload_at_);
}

void I8254Channel::load_state(StateReader& in, Nanos now) {
  I8254Channel c(false);
  c.access_ = in.u8();
  c.mode_bits_ = in.u8();
  const std::uint8_t mode = in.u8();
  c.bcd_ = in.boolean();
  c.gate_ = in.boolean();
  c.write_msb_next_ = in.boolean();
  c.write_lsb_ = in.u8();
  c.read_msb_next_ = in.boolean();
  const bool has_latched_count = in.boolean();
  const std::uint16_t latched_count = in.u16();
  c.latched_msb_next_ = in.boolean();
  const bool has_latched_status = in.boolean();
  const std::uint8_t latched_status = in.u8();
  c.cr_ = in.u32();
  c.n_ = in.u32();
  c.armed_ = in.boolean();
  c.loaded_ = in.boolean();
  c.running_ = in.boolean();
  c.triggered_ = in.boolean();
  c.writing_ = in.boolean();
  c.null_count_ = in.boolean();
  c.run_start_ = read_nanos(in);
  c.ticks_base_ = in.u64();
  c.frozen_ce_ = in.u32();
  c.reload_pending_ = in.boolean();
  c.reload_at_ = read_nanos(in);

  if (c.access_ < kPitAccessLsb || c.access_ > kPitAccessWord) {
    in.fail("counter access mode " + std::to_string(c.access_));
  }
  if (c.mode_bits_ > 7) in.fail("counter mode bits " + std::to_string(c.mode_bits_));
  const int effective = c.mode_bits_ >= 6 ? c.mode_bits_ - 4 : c.mode_bits_;
  if (mode > 5 || mode != effective) in.fail("counter mode " + std::to_string(mode));
  c.mode_ = mode;
  // Counts are 1..65536 (10^4 in BCD; a count loaded in binary may outlive a switch to BCD,
  // which the CE reads modulo 10^4), and the frozen CE at most a count.
  constexpr std::uint32_t kMaxCount = 0x10000;
  if (c.cr_ < 1 || c.cr_ > kMaxCount || c.n_ < 1 || c.n_ > kMaxCount) {
    in.fail("counter count " + std::to_string(c.cr_) + "/" + std::to_string(c.n_));
  }
  if (c.frozen_ce_ > kMaxCount) in.fail("counting element " + std::to_string(c.frozen_ce_));
  if (has_latched_count) {
    if (c.bcd_ && !bcd_digits(latched_count)) in.fail("a latched BCD count with a digit above 9");
    c.latched_count_ = latched_count;
  } else if (latched_count != 0 || c.latched_msb_next_) {
    in.fail("a latched count's bytes without a latched count");
  }
  if (has_latched_status) {
    c.latched_status_ = latched_status;
  } else if (latched_status != 0) {
    in.fail("a latched status byte without a latched status");
  }
  if (c.write_msb_next_ && c.access_ != kPitAccessWord) in.fail("an LSB pending outside word access");
  if (c.writing_ && (mode != kPitModeInterruptOnTerminalCount || !c.write_msb_next_)) {
    in.fail("a count write in progress that mode " + std::to_string(mode) + " never starts");
  }
  const bool one_shot_hw = mode == kPitModeHardwareRetriggerableOneShot ||
                           mode == kPitModeHardwareTriggeredStrobe;
  if (c.triggered_ && !one_shot_hw) in.fail("a gate trigger in a mode without one");
  if (c.running_ && !c.loaded_ && !one_shot_hw) in.fail("a counter running with no count");
  // Times: counting started no later than now, and a reload is due within one cycle.
  if (c.run_start_ < Nanos{0} || c.run_start_ > now) in.fail("a run start outside [0, now]");
  if (c.ticks_base_ > pit_ticks_in(now)) in.fail("more ticks counted than vm_clock holds");
  const Nanos latest_reload = now + pit_cycle_duration(kMaxCount);
  if (c.reload_at_ < Nanos{0} || c.reload_at_ > latest_reload) in.fail("a reload point out of range");
  if (c.reload_pending_) {
    const bool periodic = mode == kPitModeRateGenerator || mode == kPitModeSquareWave;
    if (!periodic || !c.running_ || c.reload_at_ <= c.run_start_) in.fail("a reload never scheduled");
  }
  *this = c;
}

void TickDelivery::save_state(StateWriter& out, std::uint64_t due_ticks) const {
  std::lock_guard lock(mu_);
  Stats stats = stats_;
  std::uint64_t owed = owed_ticks_;
  if (policy_ == LostTickPolicy::kDelay) {
    owed += due_ticks;
  } else {
    stats.ticks_lost += due_ticks;  // what kDiscard's next expiry would have skipped
  }
  if (owed > kMaxOwedTicks) {
    stats.ticks_lost += owed - kMaxOwedTicks;
    owed = kMaxOwedTicks;
  }
  out.u64(owed);
  write_delivery_stats(out, stats);
  out.u64(carried_merged_ + audit_.edges_merged());
  out.u64(carried_audits_ + audit_.audits());
  out.u64(carried_delivered_ + (train_ ? train_->delivered() : 0));
  out.boolean(carried_abandoned_ || audit_.abandoned());
}

TickDelivery::Saved TickDelivery::read_state(StateReader& in, Nanos now) {
  Saved s;
  s.owed_ticks = in.u64();
  s.stats = read_delivery_stats(in);
  s.merged = in.u64();
  s.audits = in.u64();
  s.train_delivered = in.u64();
  s.abandoned = in.boolean();
  if (s.owed_ticks > kMaxOwedTicks) {
    in.fail(std::to_string(s.owed_ticks) + " ticks owed (at most " +
            std::to_string(kMaxOwedTicks) + ")");
  }
  // IRQ0's edges come at most once per input clock tick (a count of 1), so no counter of them
  // can exceed the ticks vm_clock holds (plus what a lost-tick policy may have dropped or owed
  // on top). The live device adds to these and does arithmetic on their differences.
  const std::uint64_t most = pit_ticks_in(now) + kMaxOwedTicks;
  for (const std::uint64_t v :
       {s.stats.ticks_injected, s.stats.ticks_late, s.stats.ticks_lost, s.stats.ticks_coalesced,
        s.stats.ticks_missed, s.stats.ticks_redelivered, s.stats.train_starts,
        s.stats.train_fallbacks, s.stats.fallback_ticks, s.merged, s.audits,
        s.train_delivered}) {
    if (v > most) in.fail("a tick count of " + std::to_string(v) + ", more than vm_clock holds");
  }
  return s;
}

void TickDelivery::restore(const Saved& saved, Nanos now) noexcept {
  std::lock_guard lock(mu_);
  owed_ticks_ = saved.owed_ticks;
  stats_ = saved.stats;
  carried_merged_ = saved.merged;
  carried_audits_ = saved.audits;
  carried_delivered_ = saved.train_delivered;
  carried_abandoned_ = saved.abandoned;
  // The train's trouble check counts what is new since its baselines: the loaded counts are
  // not new (a train started by the reschedule before this took the fresh device's zeros).
  missed_checked_ = stats_.ticks_missed;
  trouble_seen_ = audit_.edges_merged();
  // What was owed goes out at the guest's pace, as it would have: first try at the first retry.
  if (owed_ticks_ > 0) retry_timer_.arm_at(now + retry_delay_);
}

void I8254Pit::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kPitStateVersion);
  for (const I8254Channel& c : channels_) c.save_state(out);
  out.u64(stats_.reprogrammings);
  out.u64(stats_.period_clamps);
  out.u64(stats_.timer_arms);
  out.u64(stats_.bad_accesses);
  // The IRQ0 timer's grid points at or before now that it has not run (late passes, kDelay
  // catching up one per pass): the restored timer starts at the first point after now, so
  // they are handed to the record as owed.
  std::uint64_t due = 0;
  const Nanos now = clock_.now();
  if (timer_period_ > Nanos{0} && expected_deadline_ && *expected_deadline_ <= now) {
    due = static_cast<std::uint64_t>((now - *expected_deadline_) / timer_period_) + 1;
  }
  delivery_.save_state(out, due);
}

void I8254Pit::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  const Nanos now = clock_.now();
  read_version(in, kPitStateVersion);
  // Everything is read and checked before anything changes (the reschedule starts trains).
  std::array<I8254Channel, kChannelCount> channels = channels_;
  for (I8254Channel& c : channels) c.load_state(in, now);
  Stats chip;
  chip.reprogrammings = in.u64();
  chip.period_clamps = in.u64();
  chip.timer_arms = in.u64();
  chip.bad_accesses = in.u64();
  const TickDelivery::Saved delivery = TickDelivery::read_state(in, now);
  in.expect_end();
  // Counters 0 and 1 have GATE tied high on a PC: a record that lowered one is not a PC's.
  if (!channels[0].gate() || !channels[1].gate()) in.fail("counter 0 or 1 with GATE low");
  I8254Channel probe = channels[0];
  const auto edges = probe.next_rising_edges(now);
  const bool periodic = edges && edges->period != Nanos{0};
  if (delivery.owed_ticks > 0 && (!periodic || delivery_.policy() != LostTickPolicy::kDelay)) {
    in.fail("ticks owed to a program that owes none");
  }

  channels_ = channels;
  reschedule_locked(now);
  stats_ = chip;  // after the reschedule: the record's counts, not the restore's re-arm
  delivery_.restore(delivery, now);
}

}  // namespace minivmm::devices
